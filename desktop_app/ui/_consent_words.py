"""What the window says about one kind of consent subject, in one entry per kind: the banner's row, the review
dialog, the notice once approved and the session's note while waiting. A new kind is one more entry here, and
tests/ui/test_consent_words.py fails until it has one (a kind without words was a KeyError in the dialog)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import ConsentKind


@dataclass(frozen=True, slots=True)
class ConsentWords:
    """{project}, {name}, {asks} (where an MCP server runs), {what} (the status phrase) and {where} (the file)
    are filled in; {names} in `waiting` is the waiting subjects' names."""

    row: str  # the banner's row (HTML)
    what: dict[str, str]  # status value -> phrase, in the row and the dialog's head
    done: str  # the conversation's notice once approved
    waiting: str  # a session opening meanwhile: what it does without the subject
    title: str  # the review dialog
    head: str  # the review dialog's first paragraph (HTML)
    approve: str
    ignore: str
    foot: str

    def status(self, status: str, fallback: str = "is not approved") -> str:
        return self.what.get(status, fallback)


_NEW_CHANGED_IT = {"new": "was never approved (a repository may have shipped it)",
                   "changed": "changed since you approved it"}
_NEW_CHANGED_THEM = {"new": "were never approved (a repository may have shipped them)",
                     "changed": "changed since you approved them"}
_BINDS_FILE = "Approving binds to the file as it is now; a file changed afterwards is asked about again."

WORDS: dict[ConsentKind, ConsentWords] = {
    ConsentKind.RULES: ConsentWords(
        row="The rules of <b>{project}</b> (<code>.agent-desk/rules.toml</code>) {what}. Until you trust them, "
            "its sessions use your own rules and only the file's deny and ask rules.",
        what={"new": "were never trusted (a repository may have shipped them)",
              "changed": "changed since you trusted them", "deleted": "were deleted since you trusted them"},
        done="The rules of {project} are trusted and in use.",
        waiting="the project's rules are not trusted: this session uses your own rules and only the file's deny "
                "and ask rules",
        title="Review the rules of {project}",
        head="The permission rules in <code>{where}</code> {what}. The agent's sandbox can write that file, so "
             "until you trust them, sessions use your own rules only (and the deny and ask rules you trusted before).",
        approve="Trust these rules", ignore="Ignore them",
        foot="Trusting takes the text shown here; a file changed after this was read is asked about again."),
    ConsentKind.HOOKS: ConsentWords(
        row="The hooks of <b>{project}</b> (<code>.agent-desk/hooks.toml</code>) {what}: they do not run until you "
            "grant them.",
        what={"new": "were never granted", "changed": "changed since you granted them"},
        done="The hooks of {project} are granted: they run from the next message.",
        waiting="the project's hooks are not granted and do not run",
        title="Review the hooks of {project}",
        head="The hooks in <code>{where}</code> {what}. The agent's sandbox can write that file, so they do not "
             "run until you grant them.",
        approve="Grant these hooks", ignore="Ignore them",
        foot="Granting takes the text shown here and the scripts under .agent-desk/ it runs, as they are now; a "
             "file changed after this was read is asked about again."),
    ConsentKind.MCP: ConsentWords(
        row="The MCP server <b>{name}</b> of <b>{project}</b> runs {asks} and {what}: it does not start until you "
            "grant it.",
        what={"new": "was never granted", "changed": "changed since you granted it"},
        done="The MCP server {name} of {project} is granted: it starts with the next message.",
        waiting="the project's MCP servers {names} are not granted and do not start",
        title="Review the MCP server {name} of {project}",
        head="The server {name} in <code>{where}</code> runs {asks}, and {what}. It does not start until you "
             "grant it.",
        approve="Grant this server", ignore="Ignore it",
        foot="Granting binds to the entry as it is now; an entry changed afterwards is asked about again."),
    ConsentKind.TEMPLATE: ConsentWords(
        row="The agent template <b>{name}</b> of <b>{project}</b> {what}: it is not offered (to you nor to "
            "sub-agents) until you approve it.",
        what=_NEW_CHANGED_IT,
        done="The template {name} of {project} is approved: it is offered from the next message.",
        waiting="the project's templates {names} are not approved and not offered",
        title="Review the agent template {name} of {project}",
        head="The template {name} in <code>{where}</code> {what}. It sets the model (and so the price), the "
             "tools, the mode and rules of the sessions and sub-agents that run on it, so it is not offered until "
             "you approve it. What it changes is at the end.",
        approve="Approve this template", ignore="Ignore it", foot=_BINDS_FILE),
    ConsentKind.SKILLS: ConsentWords(
        row="The skills of <b>{project}</b> (<code>.agent-desk/skills/</code>) {what}: they are not offered until "
            "you approve them.",
        what=_NEW_CHANGED_THEM,
        done="The skills of {project} are approved: they are offered from the next message.",
        waiting="the project's skills are not approved and not offered",
        title="Review the skills of {project}",
        head="The skills in <code>{where}</code> {what}. Their names and descriptions go into every request's "
             "prompt and their text to the agent when it loads one, so they are not offered until you approve "
             "them (all of them at once: one approval covers the set).",
        approve="Approve these skills", ignore="Ignore them",
        foot="Approving binds to every SKILL.md as it is now; a skill added or changed afterwards is asked about "
             "again. Your settings limit how many reach the prompt (skills_max, skills_max_prompt_bytes)."),
    ConsentKind.INSTRUCTIONS: ConsentWords(
        row="The instructions of <b>{project}</b> (<code>AGENTS.md</code>, <code>CLAUDE.md</code>) {what}: they "
            "are not put in the agent's prompt until you approve them.",
        what=_NEW_CHANGED_THEM,
        done="The instructions of {project} are approved: new sessions read them.",
        waiting="the project's instructions are not approved and not in the prompt",
        title="Review the instructions of {project}",
        head="The project's instructions (<code>{where}</code>) {what}. They go into the agent's system prompt "
             "at the start of each session, so a repository could steer the agent with them; they are left out "
             "until you approve them.",
        approve="Approve these instructions", ignore="Ignore them",
        foot="Approving binds to the files as they are now; a file changed afterwards (by you, a commit or the "
             "agent) is asked about again at the next session."),
    ConsentKind.NETWORK: ConsentWords(
        row="The network list of <b>{project}</b> (<code>.agent-desk/network.toml</code>) {what}: its domains are "
            "not reachable until you approve it; only your own list applies.",
        what=_NEW_CHANGED_IT,
        done="The network list of {project} is approved: its domains are reachable from now on.",
        waiting="the repository's network list is not approved: only your list applies",
        title="Review the network list of {project}",
        head="The repository's network list in <code>{where}</code> {what}. It widens what the sandbox may reach "
             "through the desk's proxy, so its domains are not reachable until you approve it; until then only "
             "your own list applies.",
        approve="Approve this list", ignore="Ignore it",
        foot="Approving binds to these patterns as they are now; one added or changed afterwards is asked about "
             "again."),
}


def words_for(kind: ConsentKind | str) -> ConsentWords:
    """The words of one kind (a str is the kind's value, as a Consent carries it)."""
    return WORDS[ConsentKind(kind)]
