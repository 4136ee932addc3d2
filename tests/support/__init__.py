"""What several test modules share: constants, builders and stand-ins, never a test.

No module here is named test_*, so pytest collects nothing from it; fixtures stay in
tests/conftest.py, which builds them from these helpers."""
