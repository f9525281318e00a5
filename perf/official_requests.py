#!/usr/bin/env python3
"""Compare the requests agentworld bench sends with those of the official eval.py.

Run by hand, outside CI (it needs a checkout of the official repository,
whose text agentworld does not ship):

    python3 perf/official_requests.py --checkout PATH/TO/Qwen-AgentWorld \
        --agentworld agentworld --data examples/bench

It starts one logging fake OpenAI-compatible server on loopback, runs the
checkout's eval/eval.py (infer, then judge) against it through a stand-in
`openai` module (a few lines of urllib: the real client is not needed), runs
`agentworld bench run --prompts CHECKOUT` against the same server, and
compares every world-model and judge request of the two: model, messages
(role and content, byte for byte), max_tokens and temperature. The fake
answers each request from a hash of its messages, so both clients get the
same answers and judge the same predictions. It prints the counts and the
first difference, and exits non-zero when the requests differ.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The stand-in for the `openai` package eval.py imports: the one call it
# makes, chat.completions.create, as a plain HTTP POST.
STANDIN = '''
import json, urllib.request

class _Msg:
    def __init__(self, content): self.content = content

class _Choice:
    def __init__(self, content): self.message = _Msg(content)

class _Resp:
    def __init__(self, body): self.choices = [_Choice(body["choices"][0]["message"]["content"])]

class _Completions:
    def __init__(self, base): self._base = base
    def create(self, **kw):
        req = urllib.request.Request(self._base.rstrip("/") + "/chat/completions",
            data=json.dumps(kw).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return _Resp(json.loads(r.read()))

class _Chat:
    def __init__(self, base): self.completions = _Completions(base)

class OpenAI:
    def __init__(self, base_url=None, api_key=None, **kw): self.chat = _Chat(base_url)
'''


def answer(body):
    """A deterministic answer: a prediction for the model, a verdict for the judge."""
    h = hashlib.sha256(json.dumps(body["messages"], ensure_ascii=False).encode()).hexdigest()
    if body.get("model") == "judge":
        s = [1 + int(h[i], 16) % 5 for i in range(5)]
        return ("<think>weighing it</think>\n<final_evaluation>\n```json\n" + json.dumps(
            {"strengths": ["s"], "weaknesses": ["w"], "scores": dict(zip(
                ["format", "factuality", "consistency", "realism", "quality"], s))}) + "\n```\n</final_evaluation>")
    return ("<think>planning " + h[:6] + "</think>\n<predicted_observation>\n**Environment Observation:**\npredicted "
            + h[:12] + "\n</predicted_observation>")


class Log:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_client = {}

    def add(self, client, body):
        with self.lock:
            self.by_client.setdefault(client, []).append(body)


def handler(log):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(n))
            client = self.path.strip("/").split("/")[0]  # /official/... or /agentworld/...
            log.add(client, body)
            out = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": answer(body)}}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
    return H


def canon(body):
    """What must agree: the model, the messages byte for byte, the parameters."""
    return json.dumps({"model": body.get("model"), "messages": [[m["role"], m["content"]] for m in body["messages"]],
                       "max_tokens": body.get("max_tokens"), "temperature": body.get("temperature")},
                      ensure_ascii=False, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkout", required=True, help="checkout of the official Qwen-AgentWorld repository")
    ap.add_argument("--agentworld", default="agentworld", help="the agentworld binary")
    ap.add_argument("--data", default="examples/bench", help="benchmark data dir (*_test.jsonl)")
    ap.add_argument("--keep", help="directory to keep the runs and the request logs in")
    a = ap.parse_args()

    work = a.keep or tempfile.mkdtemp(prefix="official-requests-")
    os.makedirs(work, exist_ok=True)
    standin = os.path.join(work, "standin")
    os.makedirs(os.path.join(standin, "openai"), exist_ok=True)
    with open(os.path.join(standin, "openai", "__init__.py"), "w") as f:
        f.write(STANDIN)

    log = Log()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(log))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    try:
        env = dict(os.environ, PYTHONPATH=standin + os.pathsep + os.path.join(a.checkout, "eval"))
        eval_py = os.path.join(a.checkout, "eval", "eval.py")
        off = os.path.join(work, "official")
        subprocess.run([sys.executable, eval_py, "infer", "--data-dir", a.data, "--model-base-url", base + "/official/v1",
                        "--model-name", "wm", "--output-dir", off], env=env, check=True, capture_output=True)
        r = subprocess.run([sys.executable, eval_py, "judge", "--predictions", os.path.join(off, "predictions.jsonl"),
                            "--judge-base-url", base + "/official/v1", "--judge-model", "judge", "--output-dir", off],
                           env=env, check=True, capture_output=True, text=True)
        official_scores = r.stdout
        aw = os.path.join(work, "agentworld")
        shutil.rmtree(aw, ignore_errors=True)
        r = subprocess.run([a.agentworld, "bench", "run", "--data", a.data, "--out", aw, "--no-cache",
                            "--model-url", base + "/agentworld/v1", "--model", "wm",
                            "--judge-url", base + "/agentworld/v1", "--judge-model", "judge",
                            "--judge-max-tokens", "32768", "--judge-temperature", "0.6",
                            "--prompts", a.checkout], check=True, capture_output=True, text=True)
        aw_scores = r.stdout
    finally:
        srv.shutdown()

    ok = True
    for model, what in (("wm", "world-model"), ("judge", "judge")):
        o = sorted(canon(b) for b in log.by_client.get("official", []) if b.get("model") == model)
        w = sorted(canon(b) for b in log.by_client.get("agentworld", []) if b.get("model") == model)
        same = o == w
        ok = ok and same and len(o) > 0
        print("%s requests: eval.py %d (%d distinct), agentworld %d (%d distinct): %s"
              % (what, len(o), len(set(o)), len(w), len(set(w)), "equal byte for byte" if same else "DIFFERENT"))
        if not same:
            for x, y in zip(o, w):
                if x != y:
                    i = next(k for k in range(min(len(x), len(y))) if x[k] != y[k]) if x[:len(y)] != y[:len(x)] else min(len(x), len(y))
                    print("  first difference at character %d:\n  eval.py:    %r\n  agentworld: %r" % (i, x[max(0, i - 80):i + 80], y[max(0, i - 80):i + 80]))
                    break
    print("\neval.py's scores:\n" + official_scores.strip())
    print("\nagentworld's scores:\n" + aw_scores.strip())
    if a.keep:
        with open(os.path.join(work, "requests.json"), "w") as f:
            json.dump(log.by_client, f, ensure_ascii=False)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
