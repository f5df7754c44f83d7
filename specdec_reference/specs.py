"""Published figures for lesson E7.1: hardware ceilings and model configurations.

Every figure names its source.  A hardware entry holds ``bandwidth`` (bytes per
second, from DRAM/HBM) and ``peak_flops`` (dense 16-bit floating-point operations
per second: NVIDIA's datasheets print the 2:4-sparsity figure too, which is twice
the dense one and is not used here).  A model entry holds what a decoding step
reads and computes: ``params``, ``layers``, ``kv_heads``, ``head_dim`` and
``bytes_per_param`` (2: the weights and the key-value cache in 16-bit).  The
entries are read-only mappings; the lesson's functions take plain dicts with the
same keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "A100_SXM_80GB",
    "H100_SXM",
    "RTX_4090",
    "APPLE_M2",
    "HARDWARE",
    "MEMORY_BYTES",
    "LLAMA2_7B",
    "LLAMA2_70B",
    "MODELS",
    "llama_param_count",
]


def _frozen(**fields: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(fields))


#: NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4):
#: "A100 80GB SXM", GPU memory bandwidth 2,039 GB/s; BFLOAT16 and FP16 Tensor Core
#: 312 TFLOPS (624 TFLOPS "with sparsity"); GPU memory 80GB.
A100_SXM_80GB = _frozen(name="A100 SXM 80 GB", bandwidth=2.039e12, peak_flops=312e12, memory=80e9)

#: NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: GPU memory bandwidth 3.35 TB/s;
#: BFLOAT16 and FP16 Tensor Core 1,979 TFLOPS, printed "with sparsity" (the dense
#: figure is half of it: 989.5; the Hopper whitepaper's table gives 989.4); GPU memory
#: 80GB.
H100_SXM = _frozen(name="H100 SXM", bandwidth=3.35e12, peak_flops=989.5e12, memory=80e9)

#: NVIDIA Ada GPU Architecture whitepaper, Appendix A, GeForce RTX 4090: memory
#: bandwidth 1008 GB/sec; Peak FP16 (and BF16) Tensor TFLOPS with FP32 Accumulate
#: 165.2 dense (330.4 with sparsity); 24 GB of memory.
RTX_4090 = _frozen(name="GeForce RTX 4090", bandwidth=1008e9, peak_flops=165.2e12, memory=24e9)

#: Apple M2 (MacBook Air, 2022), Apple newsroom, 6 June 2022: 100GB/s of unified
#: memory bandwidth.  Apple publishes no FLOP/s figure for the M2's CPU: the 1
#: TFLOP/s here is an assumed round number for 16-bit arithmetic on its eight
#: cores, not a vendor figure (the lesson says so where it uses it).  Memory: the largest
#: configuration, 24GB of unified memory (the same announcement).
APPLE_M2 = _frozen(name="Apple M2 CPU (laptop)", bandwidth=100e9, peak_flops=1e12, memory=24e9)

#: The lesson's hardware table, in the order it is printed.
HARDWARE = (A100_SXM_80GB, H100_SXM, RTX_4090, APPLE_M2)

#: Memory capacity by hardware name, in bytes (decimal GB, as the datasheets print it).
MEMORY_BYTES = MappingProxyType({spec["name"]: spec["memory"] for spec in HARDWARE})

#: Llama-2-7B, Meta's published config.json (meta-llama/Llama-2-7b-hf): hidden_size
#: 4096, intermediate_size 11008, num_hidden_layers 32, num_attention_heads 32,
#: num_key_value_heads 32 (head_dim 4096 / 32 = 128), vocab_size 32000,
#: torch_dtype float16; 6,738,415,616 parameters (:func:`llama_param_count`).
LLAMA2_7B = _frozen(
    name="Llama-2-7B",
    params=6_738_415_616,
    hidden=4096,
    intermediate=11008,
    layers=32,
    heads=32,
    kv_heads=32,
    head_dim=128,
    vocab=32000,
    bytes_per_param=2,
)

#: Llama-2-70B, Meta's published config.json (meta-llama/Llama-2-70b-hf): hidden_size
#: 8192, intermediate_size 28672, num_hidden_layers 80, num_attention_heads 64,
#: num_key_value_heads 8 (grouped-query attention, Touvron et al. 2023, Table 1 and
#: Section A.2.1), head_dim 128, vocab_size 32000; 68,976,648,192 parameters.
LLAMA2_70B = _frozen(
    name="Llama-2-70B",
    params=68_976_648_192,
    hidden=8192,
    intermediate=28672,
    layers=80,
    heads=64,
    kv_heads=8,
    head_dim=128,
    vocab=32000,
    bytes_per_param=2,
)

#: The lesson's two models.
MODELS = (LLAMA2_7B, LLAMA2_70B)


def llama_param_count(
    *, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int
) -> int:
    """Return the number of parameters of a Llama-2 model from its configuration.

    Parameters
    ----------
    hidden, intermediate, layers, heads, kv_heads, vocab : int
        ``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
        ``num_attention_heads``, ``num_key_value_heads`` and ``vocab_size`` of
        the model's ``config.json``.

    Returns
    -------
    int
        Embeddings and output head (untied), and per layer the four attention
        projections (keys and values of width ``kv_heads * head_dim``), the
        three MLP matrices and two RMSNorm weight vectors; plus the final norm.

    Notes
    -----
    With :math:`d` the hidden size, :math:`f` the MLP width, :math:`d_{kv}` the
    key-value width and :math:`V` the vocabulary,

    .. math:: N = 2 V d + L\\,(2 d^2 + 2 d\\, d_{kv} + 3 d f + 2 d) + d.

    References
    ----------
    .. [1] H. Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat
       Models", 2023, arXiv:2307.09288.

    Examples
    --------
    >>> llama_param_count(hidden=4096, intermediate=11008, layers=32, heads=32,
    ...                   kv_heads=32, vocab=32000)
    6738415616
    >>> llama_param_count(hidden=8192, intermediate=28672, layers=80, heads=64,
    ...                   kv_heads=8, vocab=32000)
    68976648192
    """
    kv_width = kv_heads * (hidden // heads)
    attention = 2 * hidden * hidden + 2 * hidden * kv_width  # q, o; then k, v
    mlp = 3 * hidden * intermediate  # gate, up, down
    per_layer = attention + mlp + 2 * hidden  # two RMSNorm weight vectors
    return 2 * vocab * hidden + layers * per_layer + hidden  # + final norm
