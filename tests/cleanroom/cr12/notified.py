"""cr12's author's variant V2 (NOTES.md): the same broker with one choice the documents leave open flipped.

The transport connects only once notified (PER-2A: "once notified, it attempts to establish connections with
remote destinations that have pending messages"), never at a SEND: a message with no connection waits for it.
Its author's one-line edit of broker.py, kept here as a subclass so that the broker stays as its author left it.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import broker  # noqa: E402


class ConnectsWhenNotified(broker.Broker):
    def transmit(self, inst, db, m, outside, addr, received=None, route=None):
        if m.dialog.name not in inst.failed and broker.up(addr) not in inst.conns:
            self.add_wait(
                inst,
                m,
                "connection",
                addr,
                "waiting for a connection to %s" % addr,
                fwd=outside,
                db=db,
                received=received,
                route=route,
            )
            return
        super().transmit(inst, db, m, outside, addr, received, route)


broker.Broker = ConnectsWhenNotified

if __name__ == "__main__":
    broker.main()
