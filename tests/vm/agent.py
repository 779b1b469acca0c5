#!/usr/bin/python3
"""The guest side of the kernel VM (scripts/kernel-vm.sh, tests/support/vm.rs).

Runs as the VM's one command, in Debian's kernel booted by virtme-ng over the host's own
filesystem. It first joins each of the VM's link NICs (MAC 02:6d:72:63:00:KK, K = 0, 1, ...)
to a bridge `bK` of its own, so that a fabric script run here can attach the switch end of
host link K (`hlK`) to it; then it serves the host on the virtio-serial port `mrc.ctl`, one
JSON object per line each way:

  {"id": 1, "op": "run", "argv": [...], "env": {...}, "stdin": "..."}
      -> {"id": 1, "rc": 0, "stdout": "...", "stderr": "..."}
  {"id": 2, "op": "spawn", "argv": [...], "env": {...}, "ready": "File:"}
      -> {"id": 2, "handle": 7, "rc": null, "said": "..."}
         (once a line containing `ready` was printed, or at once without `ready`; `rc` is
         set if the process ended first)
  {"id": 3, "op": "wait", "handle": 7}  -> {"id": 3, "rc": 0, "stdout": "...", "stderr": "..."}
  {"id": 4, "op": "kill", "handle": 7}  -> {"id": 4, "rc": -9, ...}

Requests are served concurrently (one thread each); an answer carries its request's id. When
the host closes the port (the test process ended, whichever way), every process started here
is killed and the agent exits, which powers the VM off.
"""

import glob
import json
import os
import select
import subprocess
import sys
import threading

PORT_NAME = "mrc.ctl"
LINK_MAC_PREFIX = "02:6d:72:63:00:"


def port_path():
    for d in glob.glob("/sys/class/virtio-ports/*"):
        try:
            with open(d + "/name") as f:
                if f.read().strip() == PORT_NAME:
                    return "/dev/" + os.path.basename(d)
        except OSError:
            pass
    return None


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL)


def setup_links():
    """Bridge bK around each link NIC (renamed nK); IPv6 off on both: they only carry frames."""
    sh("sysctl -qw net.ipv6.conf.default.disable_ipv6=1")
    # The emulated kernel drains its queues in bursts: deep backlogs, so that the fabric's own
    # links (veth pairs, bridges) drop nothing a real switch port would have carried.
    sh("sysctl -qw net.core.netdev_max_backlog=100000")
    sh("ip link set lo up")
    links = 0
    for d in sorted(glob.glob("/sys/class/net/*")):
        name = os.path.basename(d)
        try:
            with open(d + "/address") as f:
                mac = f.read().strip()
        except OSError:
            continue
        if not mac.startswith(LINK_MAC_PREFIX):
            continue
        k = int(mac[len(LINK_MAC_PREFIX):], 16)
        sh(
            f"ip link set {name} down && ip link set {name} name n{k} mtu 9000 && "
            f"sysctl -qw net.ipv6.conf.n{k}.disable_ipv6=1 && "
            f"ip link add b{k} type bridge mcast_snooping 0 && "
            f"ip link set n{k} master b{k} && ip link set n{k} up && ip link set b{k} up"
        )
        links += 1
    return links


class Agent:
    def __init__(self, fd):
        self.fd = fd
        self.write_lock = threading.Lock()
        self.procs = {}
        self.procs_lock = threading.Lock()
        self.next_handle = 1

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        with self.write_lock:
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]

    def popen(self, req, stdin):
        env = dict(os.environ)
        env.update(req.get("env") or {})
        return subprocess.Popen(
            req["argv"],
            env=env,
            cwd=req.get("cwd") or "/",
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def op_run(self, req):
        data = req.get("stdin")
        p = self.popen(req, subprocess.PIPE if data is not None else subprocess.DEVNULL)
        out, err = p.communicate(data.encode() if data is not None else None)
        return {"rc": p.returncode, "stdout": out.decode(errors="replace"),
                "stderr": err.decode(errors="replace")}

    def op_spawn(self, req):
        p = self.popen(req, subprocess.DEVNULL)
        ready = req.get("ready")
        said = {"stdout": [], "stderr": []}
        seen = threading.Event()

        def pump(stream, key):
            for raw in iter(stream.readline, b""):
                line = raw.decode(errors="replace")
                said[key].append(line)
                if ready is not None and ready in line:
                    seen.set()
            seen.set()

        threads = [threading.Thread(target=pump, args=(p.stdout, "stdout"), daemon=True),
                   threading.Thread(target=pump, args=(p.stderr, "stderr"), daemon=True)]
        for t in threads:
            t.start()
        with self.procs_lock:
            handle = self.next_handle
            self.next_handle += 1
            self.procs[handle] = (p, threads, said)
        if ready is not None:
            while not seen.wait(0.05):
                if p.poll() is not None:
                    for t in threads:
                        t.join()
                    break
        return {"handle": handle, "rc": p.poll(),
                "said": "".join(said["stdout"] + said["stderr"])}

    def finish(self, handle, kill):
        with self.procs_lock:
            p, threads, said = self.procs.pop(handle)
        if kill and p.poll() is None:
            p.kill()
        p.wait()
        for t in threads:
            t.join()
        return {"rc": p.returncode, "stdout": "".join(said["stdout"]),
                "stderr": "".join(said["stderr"])}

    def serve_one(self, req):
        try:
            op = req["op"]
            if op == "run":
                ans = self.op_run(req)
            elif op == "spawn":
                ans = self.op_spawn(req)
            elif op in ("wait", "kill"):
                ans = self.finish(req["handle"], op == "kill")
            else:
                ans = {"error": f"unknown op {op!r}"}
        except Exception as e:  # the host gets every failure as an answer
            ans = {"error": f"{type(e).__name__}: {e}"}
        ans["id"] = req.get("id")
        self.send(ans)

    def kill_all(self):
        with self.procs_lock:
            for p, _, _ in self.procs.values():
                if p.poll() is None:
                    p.kill()

    def serve(self):
        buf = b""
        while True:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    req = json.loads(line)
                    threading.Thread(target=self.serve_one, args=(req,), daemon=True).start()
        self.kill_all()


def main():
    path = port_path()
    if path is None:
        print(f"agent: no virtio port named {PORT_NAME}", file=sys.stderr)
        return 1
    fd = os.open(path, os.O_RDWR)
    # Before the host connects a read returns 0 at once: wait until the port is writable
    # (QEMU waits for the host to connect before it starts the guest: this returns at once).
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while not any(ev & select.POLLOUT for _, ev in poller.poll(100)):
        pass
    agent = Agent(fd)
    try:
        links = setup_links()
        agent.send({"ready": True, "kernel": os.uname().release, "links": links})
    except Exception as e:
        agent.send({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    agent.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
