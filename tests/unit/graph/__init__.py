"""Unit tests of runtime.graph (the program builders they share are in tests.graph_builders)."""
