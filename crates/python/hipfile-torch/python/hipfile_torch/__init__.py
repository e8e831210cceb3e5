"""hipfile for PyTorch: safetensors checkpoints read straight into tensors' memory.

``load_file`` returns what ``safetensors.torch.load_file`` returns (the same names, dtypes,
shapes and bytes), read by hipfile's engine into memory that PyTorch allocated; ``safe_open``
behaves like ``safetensors.safe_open``, and ``get_slice`` reads only the rows a slice needs;
``save_file`` writes what ``safetensors.torch.save_file`` writes, durably.

The GPU runtime is that of PyTorch's own build (ROCm's HIP runtime for a ROCm build, CUDA's
for a CUDA one), unless ``HIPFILE_HIP_LIBRARY`` names a library or ``HIP_PLATFORM`` a
platform, as they do for hipfile's command-line tool.
"""

from ._native import CheckpointError, __version__
from ._api import LoadReport, last_report, load_file, safe_open, save_file

__all__ = [
    "CheckpointError",
    "LoadReport",
    "__version__",
    "last_report",
    "load_file",
    "safe_open",
    "save_file",
]
