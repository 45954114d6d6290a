"""Reporters: conformance.json, a self-contained conformance.html, a terminal summary and run-to-run diffs.

Every reporter sends what it writes through ``redact`` so that no report carries a credential.
"""
