"""Statements a session runs: transactions, RECEIVE, GET CONVERSATION GROUP."""

from __future__ import annotations

from sbtck import contract as c
from sbtck.steps.vocabulary import both
from sbtck.steps.world import World

SESSION = r'session "(?P<session>[^"]+)" '
WAIT = r"(?: waiting up to (?P<wait>\d+(?:\.\d+)?) seconds?)?"
RECEIVE = (
    SESSION + r'receives (?:top (?P<top>\d+) )?from queue "(?P<queue>[^"]+)"'
    r'(?: where (?:the dialog is "(?P<dialog>[^"]+)"|the conversation group is that of dialog "(?P<group>[^"]+)"))?'
    + WAIT
)
GROUP = SESSION + r'gets a conversation group from queue "(?P<queue>[^"]+)"' + WAIT


def _wait_ms(wait: str | None) -> int | None:
    return None if wait is None else int(float(wait) * 1000)


@both(SESSION + r"begins a transaction")
def begin(world: World, session: str) -> None:
    world.run(c.BeginTransaction(world.at(), session))


@both(SESSION + r"commits")
def commit(world: World, session: str) -> None:
    world.run(c.Commit(world.at(), session))


@both(SESSION + r"rolls back")
def rollback(world: World, session: str) -> None:
    world.run(c.Rollback(world.at(), session))


@both(RECEIVE)
def receive(
    world: World, session: str, top: str | None, queue: str, dialog: str | None, group: str | None, wait: str | None
) -> None:
    world.run(
        c.Receive(
            world.at(),
            session,
            world.queue(queue),
            top=None if top is None else int(top),
            where_dialog=dialog,
            where_group=group,
            waitfor_ms=_wait_ms(wait),
        )
    )


@both(GROUP)
def get_conversation_group(world: World, session: str, queue: str, wait: str | None) -> None:
    world.run(c.GetConversationGroup(world.at(), session, world.queue(queue), waitfor_ms=_wait_ms(wait)))
