#!/bin/bash
# What the fake tmux server makes a host tmux client exec: note that it
# ran, leave the forger running as a daemon, and answer like tmux would
# for a pane running bash.
echo ran >> /app/evil.log
setsid -f python3 /app/forge.py /app/marker 30 /app/forge.log >/dev/null 2>&1 </dev/null
echo bash
