"""Unit tests: no AWS (not even moto), no subprocess, no real peer; at most a stand-in server
on 127.0.0.1 in the test's own process. Seconds in all; `make unit` runs only these."""
