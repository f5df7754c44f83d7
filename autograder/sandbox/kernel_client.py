"""The client the grader talks to a sandboxed kernel with: ready as soon as the kernel is.

jupyter_client's ``wait_for_ready`` ends by reading IOPub until it has been silent for
0.2 s.  Nothing runs meanwhile, neither the grader nor the kernel, so every submission
would spend that time idle.
:class:`SandboxedKernelClient` waits for what that silence stands for instead: the
``kernel_info_reply`` on the shell channel, and on IOPub the kernel's ``idle`` status for
that same request, which the kernel publishes after the reply.  Then IOPub is known to be
connected and the exchange's messages are consumed; whatever else is already queued is
read without waiting.  A message that comes later cannot be mistaken for a cell's output:
nbclient keeps only the messages whose parent is the cell's own request.
"""

from __future__ import annotations

import math
import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import KernelManager

#: How long to wait for IOPub's answer before asking again (IOPub can miss the first
#: one: a subscription takes a moment to reach the kernel), as jupyter_client does.
IOPUB_WAIT = 0.2


class SandboxedKernelClient(AsyncKernelClient):
    """An ``AsyncKernelClient`` whose ``wait_for_ready`` does not end on a fixed wait."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Return once the kernel has answered ``kernel_info`` on shell and IOPub.

        Raises ``RuntimeError`` if the kernel dies first or ``timeout`` seconds pass.
        """
        if not isinstance(self.parent, KernelManager):  # no process to watch: theirs
            await AsyncKernelClient.wait_for_ready(self, timeout=timeout)
            return
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while not await self._answered(self.kernel_info(), deadline):
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
        while True:  # what is already queued (the kernel's start-up status, say)
            try:
                await self.iopub_channel.get_msg(timeout=0)
            except Empty:
                break

    async def _answered(self, msg_id: str, deadline: float) -> bool:
        """Whether request ``msg_id`` got its reply and then its ``idle`` status on IOPub."""
        reply = await self._message(  # an earlier request's late reply is skipped
            self.shell_channel,
            1.0,
            deadline,
            lambda m: (
                m["msg_type"] == "kernel_info_reply" and m["parent_header"].get("msg_id") == msg_id
            ),
        )
        if reply is None:
            return False
        idle = await self._message(
            self.iopub_channel,
            IOPUB_WAIT,
            deadline,
            lambda m: (
                m["msg_type"] == "status"
                and m["content"].get("execution_state") == "idle"
                and m["parent_header"].get("msg_id") == msg_id
            ),
        )
        if idle is None:
            return False
        self._handle_kernel_info_reply(reply)
        return True

    @staticmethod
    async def _message(channel, wait: float, deadline: float, wanted) -> dict | None:
        """The first message on ``channel`` that is ``wanted``, or None after ``wait`` s."""
        until = min(time.monotonic() + wait, deadline)
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = await channel.get_msg(timeout=left)
            except Empty:
                return None
            if wanted(msg):
                return msg
