"""What the HTTP benchmark scripts (bench_search.py, bench_svm_family.py) share: a freshly
started mercer server per measurement (`Server`: a free loopback port, MERCER_DATA_DIR ""
so nothing is stored, inherited MERCER_* variables dropped, polled on /readyz until it
answers 200, stopped by PID with SIGTERM, SIGKILL after 60 s), `say` on stderr, `proc_kb`,
`begin` (the SIGTERM handler and the servers' log directory) and the medians of the table.

Standard library only: a script imports it after bench_python.ensure has picked its Python."""
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# What every benchmark server gets; a script adds its own (e.g. MERCER_MAX_FIT_BYTES).
SERVER_ENV = {"MERCER_DATA_DIR": "", "MERCER_LOG": "warn", "MERCER_FIT_WAIT_SECS": "3600",
              "MERCER_REQUEST_TIMEOUT_SECS": "3600", "MERCER_MAX_BODY_BYTES": str(1 << 30)}


def say(msg):
    """A progress line on stderr, prefixed by the running script's name."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    print(f"[{name}] {msg}", file=sys.stderr, flush=True)


def proc_kb(pid, field):
    """A kB field (VmRSS, VmHWM, ...) of /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))


def begin(prefix):
    """SIGTERM becomes SystemExit (so that finally blocks and context managers stop servers);
    returns a fresh directory for the servers' logs, announced on stderr."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix=prefix)
    say(f"server logs in {work}")
    return work


class Server:
    """One mercer process on a free loopback port: started, polled until /readyz is 200,
    stopped by its PID with SIGTERM (then SIGKILL after 60 s). `env` adds MERCER_*
    settings to SERVER_ENV."""

    def __init__(self, binary, log_path, env=None):
        self.binary, self.log_path, self.extra_env, self.proc = binary, log_path, dict(env or {}), None

    def __enter__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        # inherited MERCER_* settings dropped, and bench_python's re-exec flag (_BENCH_..._EXEC)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MERCER_") and not (k.startswith("_BENCH_") and k.endswith("_EXEC"))}
        env.update(SERVER_ENV, MERCER_BIND=f"127.0.0.1:{self.port}")
        env.update(self.extra_env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([self.binary], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:  # stopped again on any way out but ready, Ctrl-C and SIGTERM included
            deadline, problem = time.monotonic() + 120, "not ready after 120 s"
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    problem = f"exited with {self.proc.returncode} while starting"
                    break
                try:
                    if self.call("GET", "/readyz", timeout=2)[0] == 200:
                        self.start_rss = proc_kb(self.proc.pid, "VmRSS") * 1024
                        return self
                except (OSError, http.client.HTTPException):
                    pass
                time.sleep(0.05)  # poll interval of the retry loop
            with open(self.log_path, "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
            raise RuntimeError(f"server {problem}; log {self.log_path}:\n{tail}")
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                if self.proc.wait(60) != 0:
                    say(f"note: server exited {self.proc.returncode} on SIGTERM (log {self.log_path})")
            except subprocess.TimeoutExpired:
                say("note: server still up 60 s after SIGTERM: killed")
                self.proc.kill()
                self.proc.wait()

    def peak_rss(self):
        """The server's lifetime peak RSS (VmHWM) in bytes."""
        return proc_kb(self.proc.pid, "VmHWM") * 1024

    def call(self, method, path, body=None, headers=None, timeout=7200):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout, blocksize=1 << 20)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def post(self, path, payload, want):
        """POST an encoded JSON body; (client wall seconds, decoded answer). The clock covers
        sending the body and reading the whole answer, not its decoding; a status other than
        `want` raises with the answer's start."""
        t = time.perf_counter()
        st, out = self.call("POST", path, payload, {"Content-Type": "application/json"})
        wall = time.perf_counter() - t
        if st != want:
            raise RuntimeError(f"POST {path}: {st} (wanted {want}): {out[:2000].decode(errors='replace')}")
        return wall, json.loads(out)

    def fit(self, payload, path="/models"):
        """POST /models with an encoded body, synchronous; (client wall seconds, model resource)."""
        return self.post(path, payload, 201)


def median(runs, key):
    """The median of runs' values at key, None where none has one."""
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def secs(runs):
    """Median wall seconds, with the server's beside them when the runs have them."""
    if not runs:
        return "–"
    wall, server = median(runs, "wall_s"), median(runs, "server_s")
    return f"{wall:.2f}" + ("" if server is None else f" (server {server:.2f})")
