# The suite as a container image: `pytest --cluster=current` against the cluster it runs in (in-cluster config
# of its ServiceAccount, see rbac.yaml), reports written to /reports (mount a volume there).
#
# Public build (registry + PyPI reachable):   docker build -t gpu-operator-conformance .
# Offline build (these machines, `gpu_conformance.sim.kind.suiteimage`): BASE is a Debian bookworm rootfs with
# python3 made by debootstrap and `docker import`ed, and the wheels come from the build context's .wheels/
# (`pip wheel . -w .wheels` on the host), so the build runs with --network none.
ARG BASE=python:3.11-slim
FROM ${BASE}

COPY . /suite
RUN python3 -m venv /opt/conformance \
 && if [ -d /suite/.wheels ]; then \
      /opt/conformance/bin/pip install --no-cache-dir --no-index --find-links /suite/.wheels gpu-operator-conformance; \
    else \
      /opt/conformance/bin/pip install --no-cache-dir /suite; \
    fi \
 && rm -rf /suite/.wheels /suite/gobuild \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/conformance conformance \
 && mkdir -p /reports && chown 10001:10001 /reports

USER 10001
WORKDIR /suite
ENV PATH=/opt/conformance/bin:$PATH PYTHONDONTWRITEBYTECODE=1
ENTRYPOINT ["pytest", "-p", "no:cacheprovider", "--cluster=current", "--report-dir=/reports"]
CMD ["tests_conformance"]
