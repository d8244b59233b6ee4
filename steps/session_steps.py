"""Statements a session runs: transactions, RECEIVE, GET CONVERSATION GROUP."""

from __future__ import annotations

from sbtck import contract
from sbtck.steps import phrases
from sbtck.steps.vocabulary import seconds, step_for
from sbtck.steps.world import World


def _wait_ms(wait: str | None) -> int | None:
    return None if wait is None else int(float(wait) * 1000)


@step_for(phrases.BEGIN_TRANSACTION, says=(contract.BeginTransaction, lambda op, _: {"session": op["session"]}))
def begin(world: World, session: str) -> None:
    world.run(contract.BeginTransaction(world.at(), session))


@step_for(phrases.COMMIT, says=(contract.Commit, lambda op, _: {"session": op["session"]}))
def commit(world: World, session: str) -> None:
    world.run(contract.Commit(world.at(), session))


@step_for(phrases.ROLLBACK, says=(contract.Rollback, lambda op, _: {"session": op["session"]}))
def rollback(world: World, session: str) -> None:
    world.run(contract.Rollback(world.at(), session))


@step_for(
    phrases.RECEIVE,
    says=(
        contract.Receive,
        lambda op, _: {
            "session": op["session"],
            "queue": op["queue"]["queue"],
            "top": op["top"],
            "dialog": op["where_dialog"],
            "wait": seconds(op["waitfor_ms"]),
        },
    ),
)
def receive(
    world: World, session: str, top: str | None, queue: str, dialog: str | None, group: str | None, wait: str | None
) -> None:
    world.run(
        contract.Receive(
            world.at(),
            session,
            world.queue(queue),
            top=None if top is None else int(top),
            where_dialog=dialog,
            where_group=group,
            waitfor_ms=_wait_ms(wait),
        )
    )


@step_for(
    phrases.GET_CONVERSATION_GROUP,
    says=(
        contract.GetConversationGroup,
        lambda op, _: {"session": op["session"], "queue": op["queue"]["queue"], "wait": seconds(op["waitfor_ms"])},
    ),
)
def get_conversation_group(world: World, session: str, queue: str, wait: str | None) -> None:
    world.run(contract.GetConversationGroup(world.at(), session, world.queue(queue), waitfor_ms=_wait_ms(wait)))
