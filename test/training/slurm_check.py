#!/usr/bin/env python3
"""Training launched by Slurm: `srun -n 2 ztc-train` and the guide's sbatch script.

Starts a one-node Slurm of its own (munged, slurmctld and slurmd, in the
foreground, with their configuration, state, sockets and logs in a
temporary directory and on free ports), then:

  - equivalence: the example GPT compiled for 2 ranks at ZeRO stages 0 and
    2, run as `srun -n 2 ztc-train`, gives at every step the loss of one
    rank with the whole batch, within 1e-5 relative (the check
    zero_check.py makes under mpirun), and the MLP at stage 0 also its
    final parameters;
  - the sbatch script of docs/guide.md, submitted with `sbatch --wait`,
    trains and saves its checkpoint;
  - `srun -n 3` for a step compiled for 2 ranks is one error (printed by
    each rank that gets to it before the first ends the step), exit 1.

The daemons are stopped at the end, whatever happens.
Usage: slurm_check.py --ztc PATH --ztc-train PATH
"""

import argparse
import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convergence_check  # noqa: E402
import zero_check  # noqa: E402
from checks import check, summary  # noqa: E402

REPO = convergence_check.REPO
GUIDE = os.path.join(REPO, "docs", "guide.md")
NODE = "ztcnode"
# How long the daemons may take to report the node idle; polled, so a quick
# start costs a second. A bound on a wait, not a timing.
START_LIMIT_S = 120


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon(name):
    for directory in ("/usr/sbin", "/usr/bin"):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if not found:
        raise SystemExit("slurm_check: %s not found (scripts/setup.sh installs Slurm and "
                         "munge)" % name)
    return found


class Cluster:
    """A one-node Slurm on localhost; `env` has SLURM_CONF for the clients."""

    def __init__(self, root):
        self.root, self.procs = root, []
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(root, sub))
        self.conf = os.path.join(root, "slurm.conf")
        self.socket = os.path.join(root, "munge.sock")
        self.env = dict(zero_check.ENV, SLURM_CONF=self.conf)
        # zero_check's environment (one OpenMP thread per rank), without the
        # variables of a Slurm job this test may itself be running in.
        for key in list(self.env):
            if key.startswith("SLURM_") and key != "SLURM_CONF":
                del self.env[key]

    def start(self):
        key = os.path.join(self.root, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        log = lambda name: os.path.join(self.root, "log", name)  # noqa: E731
        self.spawn([daemon("munged"), "--foreground", "--force", "--key-file", key,
                    "--socket", self.socket, "--pid-file", os.path.join(self.root, "munged.pid"),
                    "--log-file", log("munged.log"),
                    "--seed-file", os.path.join(self.root, "munge.seed")])
        user = getpass.getuser()
        ports = [free_port()]
        while len(ports) < 2:
            port = free_port()
            if port != ports[0]:
                ports.append(port)
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=ztctest",
                "SlurmctldHost=localhost",
                "SlurmUser=%s" % user,
                "SlurmdUser=%s" % user,
                "SlurmctldPort=%d" % ports[0],
                "SlurmdPort=%d" % ports[1],
                "AuthType=auth/munge",
                "CredType=cred/munge",
                "AuthInfo=socket=%s" % self.socket,
                "StateSaveLocation=%s" % os.path.join(self.root, "state"),
                "SlurmdSpoolDir=%s" % os.path.join(self.root, "spool"),
                "SlurmctldPidFile=%s" % os.path.join(self.root, "slurmctld.pid"),
                "SlurmdPidFile=%s" % os.path.join(self.root, "slurmd.pid"),
                "SlurmctldLogFile=%s" % log("slurmctld.log"),
                "SlurmdLogFile=%s" % log("slurmd.log"),
                # No cgroups in a container: track and bind nothing.
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "MpiDefault=pmix",
                # Four CPUs on any machine, so that two ranks of one CPU
                # each fit beside a third for the fault case.
                "SlurmdParameters=config_overrides",
                "ReturnToService=2",
                "JobCompType=jobcomp/none",
                "AccountingStorageType=accounting_storage/none",
                "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN"
                % (NODE, socket.gethostname()),
                "PartitionName=ztc Nodes=%s Default=YES MaxTime=INFINITE State=UP "
                "OverSubscribe=YES" % NODE,
            ]) + "\n")
        self.wait_for_socket()
        self.spawn([daemon("slurmctld"), "-D", "-i", "-f", self.conf])
        self.spawn([daemon("slurmd"), "-D", "-N", NODE, "-f", self.conf])
        deadline = time.monotonic() + START_LIMIT_S
        state = ""
        while time.monotonic() < deadline:
            self.check_alive()
            result = subprocess.run(["sinfo", "-h", "-n", NODE, "-o", "%t"],
                                    capture_output=True, text=True, env=self.env)
            state = result.stdout.strip()
            if result.returncode == 0 and state == "idle":
                return
            time.sleep(0.5)
        raise SystemExit("slurm_check: the node is not idle after %d s (state %r)\n%s"
                         % (START_LIMIT_S, state, self.logs()))

    def spawn(self, command):
        self.procs.append((command[0], subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)))

    def wait_for_socket(self):
        deadline = time.monotonic() + START_LIMIT_S
        while not os.path.exists(self.socket):
            self.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit("slurm_check: munged made no socket in %d s\n%s"
                                 % (START_LIMIT_S, self.logs()))
            time.sleep(0.1)

    def check_alive(self):
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise SystemExit("slurm_check: %s exited with %d: %s\n%s" % (
                    name, proc.returncode, proc.stderr.read().decode(errors="replace"),
                    self.logs()))

    def logs(self):
        text = []
        for name in sorted(os.listdir(os.path.join(self.root, "log"))):
            with open(os.path.join(self.root, "log", name), errors="replace") as f:
                text.append("--- %s\n%s" % (name, "".join(f.readlines()[-20:])))
        return "\n".join(text)

    def stop(self):
        # Jobs first (a failed step's slurmstepd lingers for its kill wait),
        # then slurmd, the controller and munged.
        if all(proc.poll() is None for _, proc in self.procs[:3]) and len(self.procs) == 3:
            subprocess.run(["scancel", "--partition", "ztc"], env=self.env,
                           capture_output=True, timeout=60)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                queue = subprocess.run(["squeue", "-h"], env=self.env, capture_output=True,
                                       text=True, timeout=60)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.5)
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class SrunRuns(zero_check.Runs):
    """zero_check's runs, launched by srun instead of mpirun."""

    def __init__(self, args, tmp, cluster):
        self.ztc, self.train, self.mpirun, self.tmp = args.ztc, args.ztc_train, None, tmp
        self.cluster = cluster

    def launch(self, art, world, data, steps, *flags, ok=True, hostfile=None):
        command = [self.train, art, "--data", data, "--steps", steps, "--log-every", "1",
                   "--no-prefetch", *flags]
        if world > 1:
            command = ["srun", "-n", world, "--cpus-per-task", "1", "--kill-on-bad-exit=1"] \
                + command
        return srun(self.cluster, command, ok=ok)


def srun(cluster, command, ok=True, cwd=None):
    result = subprocess.run([str(a) for a in command], capture_output=True, text=True,
                            env=cluster.env, cwd=cwd, timeout=600)
    if ok and result.returncode != 0:
        raise SystemExit("command failed (%d): %s\n%s%s" % (
            result.returncode, " ".join(map(str, command)), result.stdout, result.stderr))
    return result


def guide_sbatch_script():
    """The guide's sbatch script: the ```sh block that starts with #!/bin/bash
    and holds #SBATCH lines."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if block.startswith("#!/bin/bash") and "#SBATCH" in block:
            return block
    raise SystemExit("slurm_check: docs/guide.md shows no sbatch script")


def sbatch(cluster, args, tmp, models, digits):
    """The guide's script in a directory laid out as the guide's: work/ with
    the MLP compiled for 2 ranks at stage 2 and the digits."""
    root = os.path.join(tmp, "guide")
    work = os.path.join(root, "work")
    os.makedirs(work)
    os.symlink(digits, os.path.join(work, "digits"))
    zero_check.run(args.ztc, "compile", os.path.join(models, "mlp.onnx"), "-o",
                   os.path.join(work, "mlp-z2.ztc"), "--batch-size", "16", "--world-size", "2",
                   "--zero", "2", "--loss", "cross_entropy", "--optimizer", "adamw",
                   "--lr", "3e-3")
    script = os.path.join(root, "train.sbatch")
    with open(script, "w") as f:
        f.write(guide_sbatch_script())
    env = dict(cluster.env, PATH=os.path.dirname(os.path.abspath(args.ztc_train)) + os.pathsep
               + cluster.env.get("PATH", ""))
    result = subprocess.run(["sbatch", "--wait", script], capture_output=True, text=True,
                            env=env, cwd=root, timeout=600)
    job = re.search(r"Submitted batch job (\d+)", result.stdout)
    logs = [name for name in os.listdir(work) if name.endswith(".log")]
    log = ""
    for name in logs:
        with open(os.path.join(work, name), errors="replace") as f:
            log += f.read()
    saved = re.findall(r"saved checkpoint work/ckpt-slurm at step (\d+)", log)
    check(result.returncode == 0 and job and saved and saved[-1] == "132"
          and os.path.exists(os.path.join(work, "ckpt-slurm", "latest")),
          "the guide's sbatch script (sbatch --wait): exit %d, job %s, log %s, checkpoints "
          "saved at steps %s%s" % (result.returncode, job.group(1) if job else "none",
                                   ", ".join(logs) or "missing", ", ".join(saved) or "none",
                                   "" if result.returncode == 0 else "\n" + result.stderr + log))


def wrong_world(cluster, args, models, digits, tmp):
    art = os.path.join(tmp, "mlp-wrong.ztc")
    zero_check.run(args.ztc, "compile", os.path.join(models, "mlp.onnx"), "-o", art,
                   "--batch-size", "16", "--world-size", "2", "--zero", "1", "--loss",
                   "cross_entropy")
    result = srun(cluster, ["srun", "-n", "3", "--cpus-per-task", "1", args.ztc_train, art,
                            "--data", os.path.join(digits, "train"), "--steps", "2"],
                  ok=False)
    errors = sorted(set(line for line in result.stderr.splitlines()
                        if line.startswith("error:")))
    # The same message but for the rank's number, from each rank that got to
    # say it: the first to fail ends the job step (MPI_Abort), so a rank
    # still starting may be stopped before it prints; a busy machine shows
    # one line, a quiet one three.
    distinct = set(re.sub(r"rank \d+ of", "rank N of", line) for line in errors)
    ranks = set(re.findall(r"rank (\d+) of 3", "\n".join(errors)))
    check(result.returncode == 1 and 1 <= len(errors) <= 3 and len(ranks) == len(errors)
          and len(distinct) == 1
          and "compiled for 2 ranks" in errors[0] and "start it with srun -n 2" in errors[0],
          "srun -n 3 for a step compiled for 2 ranks: exit %d, %s"
          % (result.returncode, errors[0] if len(distinct) == 1 else result.stderr.strip()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-slurm-") as tmp:
        cluster = Cluster(os.path.join(tmp, "slurm"))
        try:
            cluster.start()
            runs = SrunRuns(args, tmp, cluster)
            models = os.path.join(tmp, "models")
            zero_check.run(os.path.join(REPO, "examples", "onnx", "make_all.sh"), models)
            digits = os.path.join(tmp, "digits")
            zero_check.run(sys.executable, os.path.join(REPO, "examples", "onnx",
                                                        "prepare_digits.py"), "--out", digits)
            gpl = os.path.join(tmp, "gpl3")
            convergence_check.write_gpl_characters(gpl)
            zero_check.equivalence(runs, "gpt-srun", os.path.join(models, "gpt.onnx"), gpl,
                                   16, 20, [(2, 0), (2, 2)], "--lr", "3e-3",
                                   "--clip-grad-norm", "1", params=False)
            zero_check.equivalence(runs, "mlp-srun", os.path.join(models, "mlp.onnx"),
                                   os.path.join(digits, "train"), 32, 20, [(2, 0)],
                                   "--lr", "3e-3")
            sbatch(cluster, args, tmp, models, digits)
            wrong_world(cluster, args, models, digits, tmp)
        finally:
            cluster.stop()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
