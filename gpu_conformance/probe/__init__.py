"""The probe: the suite's only writes, in one package. A run flows through its modules top-down:

- `plan.py`: which GPU nodes get a probe pod (cordoned, busy, not sampled: a reason instead) and which path each
  takes to its GPU (device plugin, DRA claim, DRA-backed extended resource); pure.
- `run.py`: the I/O loop: resolve the namespace, create the pods, wait, capture the logs, clean up on any signal.
- `api.py`: its API client (bounded retries, the API's own words); `leftovers.py`: other runs' probe objects.
- `manifests.py` (pods, names, labels, lifetime) and `claims.py` (the DRA path's template and claim, the
  scheduler's words): what the probe writes; `devices.py`: the DRA devices a node publishes and who holds them.
- `states.py`: a probe pod's states in the words the wait loop and the checks share; pure.
- `observations.py` (what the probe saw, plain data) and `output.py` (the container's script and its parser).

The judging is not here: `checks/probe_checks.py` holds PRB-001..004 as pure functions of the observations.
Nothing is imported in this file, so the snapshot can import `observations` without pulling in the run.
"""
