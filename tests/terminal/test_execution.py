"""The execution service on real processes: limits, signals, sessions, re-resolution."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import select
import signal
from pathlib import Path

import pytest

from deepseek_eyes.errors import PolicyBlockedError, TerminalError
from deepseek_eyes.terminal.execution import process
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.chain import verify_receipt
from deepseek_eyes.terminal.service import ServiceConfig
from terminal.support import ServiceFactory, require_bwrap

pytestmark = pytest.mark.anyio


def _group_alive(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


def _wait_until_gone(pids: list[int]) -> list[int]:
    """Pids (of ``pids``) still running after each had up to 10 s to finish dying.

    SIGKILL is sent before this is called; a killed process releases its pipes a moment
    before it becomes a zombie, so wait on each one's pidfd (an event, not a sleep).
    """
    survivors = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], 10)
        finally:
            os.close(fd)
        if not ready:
            survivors.append(pid)
    return survivors


async def _wait_for_state(pid: int, flag: int) -> None:
    """Block (off the loop, bounded) until the child reports a stop or continue."""
    def wait() -> None:
        os.waitid(os.P_PID, pid, flag | os.WNOWAIT)
    await asyncio.wait_for(asyncio.to_thread(wait), 10)


async def test_plan_execute_and_signed_receipt(
    make_service: ServiceFactory, sandbox: str | None, workspace: Path
) -> None:
    service = make_service(mode="read-only", sandbox=sandbox)
    plan = service.plan(command="cat a.txt")
    assert plan["decision"]["allowed"]
    assert plan["state"] == "planned"
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    assert receipt["status"] == "completed"
    assert receipt["exit_code"] == 0
    assert receipt["stdout"]["text"] == "alpha\n"
    assert receipt["stdout"]["sha256"] == hashlib.sha256(b"alpha\n").hexdigest()
    assert receipt["command"]["executable"].endswith("/cat")
    assert receipt["command"]["cwd"] == str(workspace)
    assert receipt["sandbox"]["kind"] == ("bwrap" if sandbox else "none")
    assert receipt["sandbox"]["workspace_writable"] is False
    assert receipt["sequence"] == 1
    assert receipt["previous_hash"] is None
    verify_receipt(receipt, service.keyring)
    again = service.plan(session_id=plan["session_id"], argv=["cat", "b.txt"])
    second = await service.execute(again["session_id"], again["plan_id"])
    assert second["sequence"] == 2
    assert second["previous_hash"].startswith("sha256:")


async def test_the_sandbox_is_the_boundary(workspace: Path, tmp_path: Path) -> None:
    """Even if the policy missed something, bwrap keeps a read plan from writing the
    workspace and a non-network plan off the network."""
    import socket
    import subprocess

    from deepseek_eyes.terminal.execution.sandbox import SandboxPlan, child_environment, wrap_argv

    bwrap = require_bwrap()
    home = tmp_path / "home"
    home.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    probe = (
        "import socket, pathlib\n"
        "try:\n    pathlib.Path('written.txt').write_text('x'); print('wrote')\n"
        "except OSError as e: print('no-write', e.errno)\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('net')\n"
        "except OSError as e: print('no-net')\n"
    )
    argv = ["python3", "-c", probe]
    for writable, network in ((False, False), (True, True)):
        wrapped, program = wrap_argv(argv, "/usr/bin/python3", str(workspace), str(home),
                                     (str(workspace),), SandboxPlan("bwrap", network, writable),
                                     bwrap)
        done = subprocess.run(  # noqa: S603 - our own argv, no shell
            wrapped, executable=program, cwd=workspace, capture_output=True,
            env=child_environment(str(home)), timeout=60, check=False, stdin=subprocess.DEVNULL,
        )
        out = done.stdout.decode()
        assert ("wrote" in out) is writable, out + done.stderr.decode()
        assert ("net" in out.split()) is network, out
    listener.close()


async def test_trusted_writes_run_in_a_writable_sandbox(
    make_service: ServiceFactory, workspace: Path
) -> None:
    service = make_service(mode="trusted", sandbox=require_bwrap())
    plan = service.plan(argv=["touch", "new.txt"])
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    assert receipt["status"] == "completed"
    assert (workspace / "new.txt").exists()
    assert receipt["sandbox"] == {"kind": "bwrap", "network": False, "workspace_writable": True}


async def test_child_environment_is_reduced(
    make_service: ServiceFactory, sandbox: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_EYES_TERMINAL_TOKEN", "t" * 64)
    monkeypatch.setenv("SOME_OTHER_VALUE", "visible-to-no-child")
    service = make_service(mode="read-only", sandbox=sandbox)
    plan = service.plan(argv=["env"])
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    env = dict(line.split("=", 1) for line in receipt["stdout"]["text"].splitlines())
    assert "DEEPSEEK_EYES_TERMINAL_TOKEN" not in env
    assert "SOME_OTHER_VALUE" not in env
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert Path(env["HOME"]).name.startswith("deepseek-eyes-home-")
    assert env["TMPDIR"] == env["HOME"]
    assert not Path(env["HOME"]).exists()  # removed after the run
    assert "t" * 64 not in str(receipt)
    assert set(receipt["command"]["env_names"]) == set(env)


async def test_approval_is_required_in_confirm_mode(make_service: ServiceFactory) -> None:
    service = make_service(mode="confirm")
    plan = service.plan(argv=["touch", "c.txt"])
    assert plan["decision"]["requires_approval"]
    with pytest.raises(TerminalError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_APPROVAL_REQUIRED"
    approved = service.approve(plan["session_id"], plan["plan_id"], via="console", by="tester")
    assert approved["state"] == "approved"
    assert approved["approval"]["by"] == "tester"
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    assert receipt["approval"]["approved"] is True
    assert receipt["approval"]["required"] is True
    with pytest.raises(TerminalError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_PLAN_STATE"


async def test_refused_plans_never_run(make_service: ServiceFactory) -> None:
    service = make_service(mode="trusted")
    plan = service.plan(command="cat a.txt; id")
    assert plan["state"] == "refused"
    with pytest.raises(PolicyBlockedError):
        service.approve(plan["session_id"], plan["plan_id"], via="console", by="tester")
    with pytest.raises(PolicyBlockedError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_POLICY_BLOCKED"


async def test_a_client_never_approves_its_own_plan_unless_told_it_may(
    make_service: ServiceFactory, workspace: Path
) -> None:
    service = make_service(mode="confirm")  # approvals: "person", the default
    plan = service.plan(argv=["touch", "c.txt"], owner="conn-a")
    with pytest.raises(TerminalError) as err:
        service.approve(plan["session_id"], plan["plan_id"], via="client", by="mcp-token")
    assert err.value.code == "TERMINAL_SELF_APPROVAL_REFUSED"
    assert service.get_plan(plan["session_id"], plan["plan_id"]).state == "planned"
    with pytest.raises(TerminalError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_APPROVAL_REQUIRED"
    assert not (workspace / "c.txt").exists()
    for via, by in (("console", "console-0a1b2c3d"), ("cli", "tty")):
        again = service.plan(argv=["touch", "c.txt"], owner="conn-a")
        approved = service.approve(again["session_id"], again["plan_id"], via=via, by=by)
        assert approved["approval"]["via"] == via
        assert approved["approval"]["by"] == by
    denied = service.deny(plan["session_id"], plan["plan_id"], via="client", by="mcp-token")
    assert denied["state"] == "denied"  # a denial only takes power away

    trusting = make_service(mode="confirm", approvals="mcp-client")
    plan = trusting.plan(argv=["touch", "c.txt"], owner="conn-a")
    approved = trusting.approve(plan["session_id"], plan["plan_id"], via="client",
                                by="mcp-token")
    receipt = await trusting.execute(plan["session_id"], plan["plan_id"])
    assert receipt["approval"]["via"] == "client"
    assert receipt["approval"]["by"] == "mcp-token"
    assert (workspace / "c.txt").exists()


def test_approvals_accept_only_their_two_values(workspace: Path) -> None:
    with pytest.raises(ValueError, match="approvals"):
        ServiceConfig(workspace=Workspace.of([workspace]), approvals="client")


async def test_timeout_kills_the_whole_group(
    make_service: ServiceFactory, sandbox: str | None
) -> None:
    service = make_service(mode="trusted", sandbox=sandbox)
    script = "sleep 300 & sleep 300 & (sleep 300 &) ; echo started; wait"
    plan = service.plan(argv=["sh", "-c", script], timeout=1.0)
    started = await service.execute(plan["session_id"], plan["plan_id"], wait=False)
    assert started["state"] == "running"
    session = service.sessions[plan["session_id"]]
    assert session.process is not None
    pgid = session.process.pgid
    receipt = await service.receipt_for_plan(plan["session_id"], plan["plan_id"], wait_s=30)
    assert receipt is not None
    assert receipt["status"] == "timed_out"
    assert receipt["signal"] == "SIGKILL"
    assert "started" in receipt["stdout"]["text"]
    assert _wait_until_gone(_group_alive(pgid)) == []


async def test_a_leader_that_exits_takes_its_group_and_pipes_with_it(
    make_service: ServiceFactory,
) -> None:
    """The background sleep holds stdout open; the group dies with the leader, so the
    receipt comes at once, not after the drain allowance."""
    service = make_service(mode="trusted")
    plan = service.plan(argv=["sh", "-c", "sleep 300 & echo started"])
    receipt = await asyncio.wait_for(service.execute(plan["session_id"], plan["plan_id"]), 4)
    assert receipt["status"] == "completed"
    assert receipt["exit_code"] == 0
    assert receipt["stdout"]["text"] == "started\n"


async def test_a_pipe_held_open_outside_the_group_is_drained_for_a_bounded_time(
    make_service: ServiceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grandchild that left the group (setsid) keeps stdout open after the leader
    exits: the receipt follows once the drain allowance runs out."""
    monkeypatch.setattr(process, "_DRAIN_AFTER_EXIT_S", 0.2)
    service = make_service(mode="trusted")
    plan = service.plan(argv=["sh", "-c", "setsid sleep 300 & echo $!"])
    receipt = await asyncio.wait_for(service.execute(plan["session_id"], plan["plan_id"]), 30)
    os.kill(int(receipt["stdout"]["text"]), signal.SIGKILL)
    assert receipt["status"] == "completed"
    assert receipt["exit_code"] == 0


async def test_output_limits_truncate_and_hash_everything(make_service: ServiceFactory) -> None:
    service = make_service(mode="read-only", max_output_bytes=1024)
    plan = service.plan(argv=["seq", "1", "200000"])
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    expected = "".join(f"{i}\n" for i in range(1, 200001)).encode()
    assert receipt["stdout"]["truncated"] is True
    assert receipt["stdout"]["bytes"] == len(expected)
    assert receipt["stdout"]["sha256"] == hashlib.sha256(expected).hexdigest()
    assert receipt["stdout"]["text"] == expected[:1024].decode()
    assert receipt["stderr"]["truncated"] is False


async def test_pause_resume_cancel_and_one_active_process(
    make_service: ServiceFactory, sandbox: str | None
) -> None:
    service = make_service(mode="trusted", sandbox=sandbox)
    session_id = service.open_session()["session_id"]
    sub = service.bus.get(session_id).subscribe()  # type: ignore[union-attr]
    assert sub is not None
    # One process, no fork: a shell that vforks could be stopped between vfork and exec, and
    # then its parent waits (uninterruptibly) instead of reporting the stop the test waits on.
    code = "import time; print('ready', flush=True); time.sleep(300)"
    plan = service.plan(session_id=session_id, argv=["python3", "-c", code])
    await service.execute(session_id, plan["plan_id"], wait=False)
    async for event in sub.events():  # wait for the child to be up, on its own output
        if event["type"] == "output" and "ready" in event["data"]:
            break
    other = service.plan(session_id=session_id, argv=["true"])
    with pytest.raises(TerminalError) as err:
        await service.execute(session_id, other["plan_id"])
    assert err.value.code == "TERMINAL_SESSION_BUSY"
    process = service.sessions[session_id].process
    assert process is not None
    assert service.pause(session_id)["state"] == "paused"
    await _wait_for_state(process.popen.pid, os.WSTOPPED)
    assert service.list_sessions()[0]["paused"] is True
    assert service.resume(session_id)["state"] == "running"
    await _wait_for_state(process.popen.pid, os.WCONTINUED)
    receipt = await service.cancel(session_id)
    assert receipt["status"] == "cancelled"
    with pytest.raises(TerminalError) as err:
        service.pause(session_id)
    assert err.value.code == "TERMINAL_NO_ACTIVE_PROCESS"
    done = await service.execute(session_id, other["plan_id"])
    assert done["status"] == "completed"


async def test_inactivity_expiry_ends_process_and_streams(make_service: ServiceFactory) -> None:
    now = [1000.0]
    service = make_service(mode="trusted", session_idle_timeout=60, clock=lambda: now[0])
    session_id = service.open_session()["session_id"]
    sub = service.bus.get(session_id).subscribe()  # type: ignore[union-attr]
    assert sub is not None
    plan = service.plan(session_id=session_id, argv=["sleep", "300"])
    await service.execute(session_id, plan["plan_id"], wait=False)
    task = service.sessions[session_id].task
    assert task is not None
    now[0] += 30
    assert service.reap() == []
    now[0] += 61
    assert service.reap() == [session_id]
    receipt = await asyncio.wait_for(task, 30)
    assert receipt["status"] == "expired"
    kinds = [event["type"] async for event in sub.events()]
    assert kinds[-1] == "closed"
    with pytest.raises(TerminalError) as err:
        service.session(session_id)
    assert err.value.code == "TERMINAL_SESSION_NOT_FOUND"


async def test_session_limit(make_service: ServiceFactory) -> None:
    service = make_service(max_sessions=2)
    service.open_session()
    service.open_session()
    with pytest.raises(TerminalError) as err:
        service.open_session()
    assert err.value.code == "TERMINAL_SESSION_LIMIT"


async def test_plan_changed_between_plan_and_execute(
    make_service: ServiceFactory, workspace: Path
) -> None:
    link = workspace / "link"
    link.symlink_to(workspace / "a.txt")
    service = make_service(mode="read-only")
    plan = service.plan(argv=["cat", "link"])
    assert plan["decision"]["allowed"]
    link.unlink()
    link.symlink_to("/etc/hostname")
    with pytest.raises(TerminalError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_PLAN_CHANGED"
    link.unlink()
    link.symlink_to(workspace / "b.txt")
    with pytest.raises(TerminalError) as err:
        await service.execute(plan["session_id"], plan["plan_id"])
    assert err.value.code == "TERMINAL_PLAN_CHANGED"


async def test_secrets_are_redacted_before_signing(make_service: ServiceFactory) -> None:
    from deepseek_eyes.terminal.execution.redact import Redactor

    service = make_service(mode="read-only", redactor=Redactor(["s3cr3t-value-123"]))
    plan = service.plan(argv=["echo", "API_KEY=abcdef123456", "s3cr3t-value-123",
                              "Authorization: Bearer abcdefghijklmnop"])
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    text = str(receipt)
    assert "abcdef123456" not in text
    assert "s3cr3t-value-123" not in text
    assert "abcdefghijklmnop" not in text
    assert receipt["redactions"] >= 3
    verify_receipt(receipt, service.keyring)


async def test_missing_program_at_spawn_gives_a_receipt(
    make_service: ServiceFactory, workspace: Path
) -> None:
    service = make_service(mode="trusted")
    script = workspace / "tool.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    plan = service.plan(argv=["./tool.sh"])
    assert plan["decision"]["allowed"]
    assert plan["decision"]["risk"] == "high"
    receipt = await service.execute(plan["session_id"], plan["plan_id"])
    assert receipt["stdout"]["text"] == "hi\n"


async def test_audit_rows_hold_no_command_text(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    from deepseek_eyes.audit import AuditLog
    from deepseek_eyes.store.db import Database

    db = Database(tmp_path / "audit.db")
    service = make_service(mode="confirm")
    service.audit = AuditLog(db)
    plan = service.plan(argv=["echo", "very-private-argument"])
    await service.execute(plan["session_id"], plan["plan_id"])
    rows = service.audit.recent()
    kinds = {row["kind"] for row in rows}
    assert {"terminal.session.open", "terminal.plan", "terminal.execute"} <= kinds
    assert "very-private-argument" not in json.dumps(rows)
    db.close()
