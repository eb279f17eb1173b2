"""fmha-workbench: profile and tune a cuTile FlashAttention kernel."""

__version__ = "0.1.0"
