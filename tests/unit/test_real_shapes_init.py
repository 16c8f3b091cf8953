"""`needle init` on real repositories' file names: every dot of a name is part of the prompt's name.

Genkit names a prompt's variants ``hello.history.prompt`` (firebase/genkit
js/testapps/dev-ui-gallery/prompts), and Azure-Samples/azure-search-openai-demo keeps an answer
prompt as ``chat_answer.system.jinja2`` + ``chat_answer.user.jinja2``: before, every file was
named after the text up to its first dot, so the second became ``chat_answer_2`` or
``prompts_hello``, names that say nothing.
"""

from __future__ import annotations

from needle_action.config import load_config
from needle_action.scaffold import write_starter
from tests.builders import write


def test_variants_and_role_files_keep_their_whole_name(tmp_path):
    write(tmp_path, "prompts/hello.prompt", "Say hello to {{name}}.\n")
    write(tmp_path, "prompts/hello.history.prompt", "{{history}}Say hello to {{name}}.\n")
    write(tmp_path, "prompts/chat_answer.system.jinja2", "Answer from the sources.\n")
    write(tmp_path, "prompts/chat_answer.user.jinja2", "{{ user_query }}\n")
    write(tmp_path, "prompts/agent_system.txt.j2", "You are an agent.\n")
    config = load_config(write_starter(tmp_path, tmp_path / "needle.toml", force=False))
    assert set(config.prompts) == {
        "hello",
        "hello_history",
        "chat_answer_system",
        "chat_answer_user",
        "agent_system",
    }
    assert config.prompts["hello_history"].template == "prompts/hello.history.prompt"
