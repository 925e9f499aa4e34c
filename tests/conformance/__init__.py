"""PyTorch-conformance tests. A package: its modules share names with tests/ ones (test_errors)
and import their one comparison from torch_compare."""
