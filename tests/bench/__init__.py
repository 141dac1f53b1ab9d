"""Tests of the offline test bench itself, against the real client libraries."""
