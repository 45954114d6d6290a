"""gpu-operator-conformance: does every GPU node really give pods a GPU, and if not, which layer broke first."""

__version__ = "0.1.0"
