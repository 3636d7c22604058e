"""A plain script with its own USR1 handler and no hpcflow code: it counts steps in a file of its
own (its checkpoint), saves at the step after USR1 and exits 0, and starts again from the saved
count. Prints ``own-step <n>`` per step, ``own-saved <n>`` on the warning, ``own-done <n>``."""

import os
import signal
import sys
import time

state = os.path.join(os.getcwd(), "own-state.txt")
warned = False


def on_usr1(signum, frame):  # noqa: ANN001, ARG001
    global warned
    warned = True


signal.signal(signal.SIGUSR1, on_usr1)
total = int(sys.argv[1])
step = int(open(state).read()) if os.path.exists(state) else 0
while step < total:
    time.sleep(0.2)
    step += 1
    print(f"own-step {step}", flush=True)
    if warned:
        with open(state + ".tmp", "w") as fh:
            fh.write(str(step))
        os.replace(state + ".tmp", state)
        print(f"own-saved {step}", flush=True)
        sys.exit(0)
print(f"own-done {step}", flush=True)
