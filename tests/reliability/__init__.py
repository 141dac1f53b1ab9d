"""Reliability scenarios: crashes, bursts, faults of both peers, hostile input."""
