"""Turns recorded results into reports."""
