"""A one-node Slurm cluster on this machine: what the tests and CI run the cluster path on (not for production).

Debian's slurm-wlm (22.05 on bookworm) as root, without systemd or cgroups: its own munge daemon and key,
``proctrack/linuxproc``, ``task/none``, no job accounting and no ``cgroup.conf``; batch jobs start as soon as they can
(``batch_sched_delay=0``: by default Slurm waits 3 s before it starts a job whose dependency has just ended, and on a
small pipeline those waits between stages were most of the wall time; ``bf_interval=1``: a job the main scheduler passed
over, as it can on a loaded machine, is started by the backfill scheduler within a second, not its default 30); the
controller and the node daemon on free ports, every file (configuration, state, logs, munge socket) in one folder, so
several such clusters can run side by side. Clients find it through ``SLURM_CONF`` (:meth:`LocalCluster.env`). The
daemons run in the foreground as children of this process and :meth:`LocalCluster.stop` ends them (jobs first).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
COMMANDS = ("slurmctld", "slurmd", "sbatch", "munged")
CONF = """\
ClusterName=uqlocal
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
KillWait=10
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class LocalClusterError(RuntimeError):
    """Slurm could not be installed or its daemons did not start (the message says why)."""


def install() -> None:
    """Install Debian's Slurm and munge (``apt-get``, as root) unless their commands are on ``PATH``."""
    if all(shutil.which(c) for c in COMMANDS):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise LocalClusterError(
            f"Slurm is not installed and cannot be installed here (needs root and apt-get): "
            f"apt-get install -y {' '.join(PACKAGES)}"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:  # a fresh machine: the package lists first
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not all(shutil.which(c) for c in COMMANDS):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise LocalClusterError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {' | '.join(tail)}")


def _memory_mb() -> int:
    """This machine's memory in megabytes (the node's RealMemory: jobs asking for more never start)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A one-node cluster whose files live in ``folder``; ``cpus``: the node's CPUs (default: this process's)."""

    def __init__(self, folder, cpus: int | None = None):
        self.folder = Path(folder).resolve()
        if not re.fullmatch(r"[A-Za-z0-9_./+-]+", str(self.folder)):
            raise LocalClusterError(f"{self.folder}: the folder of a local cluster needs a plain path (slurm.conf)")
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.conf = self.folder / "slurm.conf"
        self._procs: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        """What a client needs in its environment to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def _daemon(self, name: str, args: list[str]) -> None:
        log = open(self.folder / "log" / f"{name}.stdout", "w")  # noqa: SIM115 - the daemon's for its lifetime
        self._procs.append(
            subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **self.env())
            )
        )
        log.close()

    def start(self, timeout: float = 60) -> LocalCluster:
        """Write the configuration, start munged, slurmctld and slurmd, and wait until the node is idle."""
        install()
        for sub in ("state", "spool", "log", "munge"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        munge = self.folder / "munge"
        munge.chmod(0o755)  # munged: its socket's folder must be searchable by all, not writable
        key = munge / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(
            CONF.format(
                host=host,
                ctld_port=_free_port(),
                d_port=_free_port(),
                folder=self.folder,
                munge_socket=munge / "socket",
                cpus=self.cpus,
                mem_mb=_memory_mb(),
            )
        )
        self._daemon(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",  # --force: a socket below 0700 folders (root reaches it)
                f"--socket={munge / 'socket'}",
                f"--key-file={key}",
                f"--pid-file={munge / 'pid'}",
                f"--log-file={munge / 'log'}",
                f"--seed-file={munge / 'seed'}",
            ],
        )
        self._wait(lambda: (munge / "socket").exists(), 20, "munged did not create its socket")
        self._daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._daemon("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(self._idle, timeout, "the node did not become idle")
        return self

    def _idle(self) -> bool:
        proc = subprocess.run(
            ["sinfo", "--noheader", "--format=%T"],
            capture_output=True,
            text=True,
            env=dict(os.environ, **self.env()),
            timeout=30,
        )
        return proc.returncode == 0 and proc.stdout.strip() == "idle"

    def _wait(self, ready, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                break
            if ready():
                return
            time.sleep(0.3)
        logs = []
        for f in sorted((self.folder / "log").glob("*")) + [self.folder / "munge" / "log"]:
            if f.is_file() and f.stat().st_size:
                logs.append(f"{f.name}: " + " | ".join(f.read_text(errors="replace").strip().splitlines()[-3:]))
        died = ", ".join(f"{Path(p.args[0]).name} exited {p.returncode}" for p in self._procs if p.poll() is not None)
        self.stop()
        raise LocalClusterError(
            f"local Slurm cluster in {self.folder}: {what} in {timeout:g} s"
            f"{'; ' + died if died else ''}. {' || '.join(logs) or 'no daemon logs'}"
        )

    def stop(self) -> None:
        """Cancel every job, then end the daemons (SIGTERM, then SIGKILL)."""
        env = dict(os.environ, **self.env())
        if any(p.poll() is None for p in self._procs) and shutil.which("scancel"):
            subprocess.run(["scancel", "--user=root"], env=env, capture_output=True, timeout=60)
            end = time.monotonic() + 20
            while time.monotonic() < end:
                q = subprocess.run(["squeue", "--noheader"], env=env, capture_output=True, text=True, timeout=30)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.5)
        for p in reversed(self._procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self._procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
