"""The CI files: every GitHub workflow passes actionlint (built from its Go module), the GitLab template passes
GitLab's CI schema, and the commands they run are ones the suite accepts."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpu_conformance.cli import build_parser
from gpu_conformance.gotools import ACTIONLINT, GoMissingError, ensure_tool

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
GITLAB = REPO / "ci-templates" / "gitlab-nightly.yml"
NIGHTLY = REPO / ".github" / "workflows" / "nightly.yml"
ENTRYPOINT = "sh deploy/nightly-entrypoint.sh"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    try:
        return ensure_tool(ACTIONLINT)
    except GoMissingError as e:
        pytest.skip(str(e))


def lint(actionlint: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    # -shellcheck= (empty) would switch the shell checks off: leave actionlint to use shellcheck when installed.
    return subprocess.run([str(actionlint), "-no-color", *map(str, files)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, check=False)


def test_workflows_pass_actionlint(actionlint: Path) -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "nightly.yml"}
    proc = lint(actionlint, *WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(actionlint: Path, tmp_path: Path) -> None:
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    # A step output that does not exist, and a misspelt key: what a careless edit of the template does.
    broken.write_text(NIGHTLY.read_text().replace("steps.run.outputs.exit", "steps.runn.outputs.exit")
                      .replace("timeout-minutes:", "timeout-minute:"))
    proc = lint(actionlint, broken)
    assert proc.returncode == 1, proc.stdout
    assert "steps.runn" in proc.stdout or "runn" in proc.stdout, proc.stdout
    assert "timeout-minute" in proc.stdout, proc.stdout


def test_project_ci_runs_the_readme_command() -> None:
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    runs = [s.get("run", "") for s in ci["jobs"]["test"]["steps"]]
    assert "bash .ci/run" in runs
    # .ci/run ends in the README's two test commands (tests/test_readme.py holds the README to the same lines).
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith(
        "\n.venv/bin/pytest -n auto\n.venv/bin/pytest --tiers=slow -n auto")


def test_nightly_workflow_does_what_the_issue_asks() -> None:
    text = NIGHTLY.read_text()
    wf = yaml.safe_load(text)
    steps = wf["jobs"]["conformance"]["steps"]
    by_name = {s.get("name", s.get("uses", "")): s for s in steps}
    assert "secrets.STAGING_KUBECONFIG" in by_name["Kubeconfig from the secret"]["env"]["KUBECONFIG_TEXT"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["name"] == "${{ env.ARTIFACT }}"
    assert "gh run download" in by_name["Earlier nights (the previous run's artifact)"]["run"]
    assert ENTRYPOINT in by_name["Tonight's run, compared with the newest earlier night"]["run"]
    verdict = by_name["Verdict in the job summary; fail on a regression"]
    assert verdict["if"] == "always()" and '>> "$GITHUB_STEP_SUMMARY"' in verdict["run"]
    assert "--fail-on-regression" in verdict["run"]
    assert wf["concurrency"]["cancel-in-progress"] is False


def gitlab_schema(path: Path) -> subprocess.CompletedProcess[str]:
    # check-jsonschema ships schemastore's GitLab CI schema (vendor.gitlab-ci): no network at test time.
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.gitlab-ci", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_gitlab_template_passes_gitlab_ci_schema(tmp_path: Path) -> None:
    proc = gitlab_schema(GITLAB)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The schema check is real: a misspelt keyword fails it.
    broken = tmp_path / "gitlab.yml"
    broken.write_text(GITLAB.read_text().replace("    when: always\n  script:", "    when: sometimes\n  script:"))
    proc = gitlab_schema(broken)
    assert proc.returncode == 1, proc.stdout


def test_gitlab_template_structure() -> None:
    ci = yaml.safe_load(GITLAB.read_text())
    jobs = {k: v for k, v in ci.items() if isinstance(v, dict) and "script" in v}
    assert jobs, "no job"
    for name, job in jobs.items():
        assert job["stage"] in ci["stages"], name
        assert job["cache"]["when"] == "always" and job["cache"]["paths"] == ["nights/"]
        assert job["artifacts"]["when"] == "always" and "nights/" in job["artifacts"]["paths"]
        assert {r["if"] for r in job["rules"]} >= {'$CI_PIPELINE_SOURCE == "schedule"'}
        script = "\n".join(job["script"])
        assert ENTRYPOINT in script and "--fail-on-regression" in script
        assert job["variables"]["GPU_CONFORMANCE_REPORTS"] == job["variables"]["NIGHTS"]


@pytest.mark.parametrize("path", [NIGHTLY, GITLAB], ids=lambda p: p.name)
def test_commands_in_templates_are_accepted(path: Path) -> None:
    text = path.read_text().replace("\\\n", " ")
    commands = re.findall(r"gpu-conformance (report history [^|>\n]*)", text)
    assert commands
    for command in commands:
        argv = shlex.split(command.replace("$NIGHTS", "nights"))
        args = build_parser().parse_args(argv)
        assert args.dir == "nights" and args.fail_on_regression
    # The run command: pytest options this suite defines, in the --option=VALUE form pytest needs.
    run = re.search(re.escape(ENTRYPOINT) + r" (pytest [^|\n]*)", text)
    assert run and "--cluster=current" in run.group(1) and run.group(1).rstrip().endswith("tests_conformance")


# `python -m gpu_conformance.<module> [args]` as .ci/run, the README and the workflows spell it.
_MODULE_RUN = re.compile(r"python3? -m (gpu_conformance(?:\.\w+)*)((?: +[\w.-]+)*)")


def _module_runs() -> list[tuple[str, str, list[str]]]:
    texts = {".ci/run": (REPO / ".ci" / "run").read_text(), "README.md": (REPO / "README.md").read_text()}
    texts.update({str(p.relative_to(REPO)): p.read_text() for p in WORKFLOWS})
    return [(where, m.group(1), m.group(2).split()) for where, text in texts.items()
            for m in _MODULE_RUN.finditer(text)]


def test_every_module_the_ci_and_readme_run_exists_and_runs_as_a_program() -> None:
    """A module moved without updating .ci/run stops a fresh machine's CI in its first minute (it happened once:
    the validator's build named at its pre-split path). Every `python -m gpu_conformance.X` in .ci/run, the README
    and the workflows names a module that exists and runs as a program; `gotools` is given a tool it knows."""
    import importlib.util

    from gpu_conformance.gotools import TOOL_GROUPS, TOOLS

    runs = _module_runs()
    assert any(where == ".ci/run" for where, _, _ in runs) and any(m == "gpu_conformance.gotools" for _, m, _ in runs)
    for where, module, args in runs:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, f"{where}: python -m {module}: no such module"
        main = spec.origin if not spec.submodule_search_locations else \
            str(Path(spec.origin).with_name("__main__.py"))
        assert Path(main).is_file() and "__main__" in Path(main).read_text(), \
            f"{where}: python -m {module} does not run as a program"
        if module == "gpu_conformance.gotools" and args and not args[0].startswith("-"):
            assert args[0] in {**TOOLS, **TOOL_GROUPS}, f"{where}: gotools has no tool {args[0]!r}"


def test_the_module_check_catches_a_moved_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ci = tmp_path / ".ci" / "run"
    ci.parent.mkdir()
    ci.write_text((REPO / ".ci" / "run").read_text().replace("gpu_conformance.sim.builds.operator_module",
                                                             "gpu_conformance.sim.operator_module"))
    (tmp_path / "README.md").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "WORKFLOWS", [])
    with pytest.raises(AssertionError, match="gpu_conformance.sim.operator_module: no such module"):
        test_every_module_the_ci_and_readme_run_exists_and_runs_as_a_program()
