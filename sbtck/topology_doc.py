"""`sbtck docs topologies`: each of the kit's topologies, its instances, databases, queues and services.

Made from the topology files themselves (sbtck/fixtures/topologies/), so it
cannot drift from them: a scenario that says `Given the topology "routing"`
starts from what this lists. A file's opening comment is its description.
"""

from __future__ import annotations

from pathlib import Path

from sbtck import topology as declared
from sbtck.fixtures import topology


def _comment(path: Path) -> list[str]:
    """The comment lines a topology file opens with, without their #."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].removeprefix(" "))
    return lines


def _queue(queue: declared.Queue) -> str:
    activation = queue.activation
    if activation.status != "ON":
        return f"queue `{queue.name}`"
    return (
        f"queue `{queue.name}`: activation ON, procedure `{activation.procedure_name}`, "
        f"at most {activation.max_queue_readers} readers"
    )


def _database(database: declared.Database) -> list[str]:
    role = f", mirroring {database.mirroring_role}" if database.mirroring_role else ""
    key = "" if database.master_key else ", no master key (its broker does not start)"
    lines = [f"  - database `{database.name}` (broker instance {database.broker_instance}{role}{key})"]
    lines += [f"    - {_queue(queue)}" for queue in database.queues]
    lines += [f"    - service `{service.name}` on `{service.queue}`" for service in database.services]
    lines += [
        f"    - event notification `{note.name}`: {note.event} on `{note.queue}`"
        for note in database.event_notifications
    ]
    return lines + _routes(database.routes, "    ")


def _routes(routes: list[declared.Route], indent: str) -> list[str]:
    return [
        f"{indent}- route `{route.name}`: service {route.service_name or 'any'}, address {route.address}"
        + (f", mirror {route.mirror_address}" if route.mirror_address else "")
        for route in routes
        if route.name
        != declared.AUTO_CREATED_LOCAL_ROUTE.name  # every database and msdb has it (the document's opening says so)
    ]


def render(directory: Path = topology.TOPOLOGY_DIR) -> str:
    out = [
        "# The kit's topologies",
        "",
        'What `Given the topology "NAME"` starts from, made from the files in sbtck/fixtures/topologies/. Every',
        "database and every msdb also starts with the route AutoCreatedLocal (ADDRESS 'LOCAL'), as in SQL Server.",
    ]
    for path in sorted(directory.glob("*.yaml")):
        plain = topology.named(path.stem, directory).plain
        out += ["", f"## {path.stem}", "", *(f"    {line}" for line in _comment(path)), ""]
        for instance in plain.instances:
            # the CPUs an instance has when its file does not say
            unsaid = declared.Instance(instance.name).cpus
            cpus = f", {instance.cpus} CPUs" if instance.cpus != unsaid else ""
            forwards = ", message forwarding ON" if instance.message_forwarding else ""
            out.append(f"- instance `{instance.name}` ({instance.address}{cpus}{forwards})")
            out += [f"  - msdb {line.lstrip('- ')}" for line in _routes(instance.msdb_routes, "")]
            for database in instance.databases:
                out += _database(database)
    return "\n".join(out) + "\n"
