"""`needle init` on real repositories' file names: every dot of a name is part of the prompt's name.

Genkit names a prompt's variants ``hello.history.prompt`` (firebase/genkit
js/testapps/dev-ui-gallery/prompts), and Azure-Samples/azure-search-openai-demo keeps an answer
prompt as ``chat_answer.system.jinja2`` + ``chat_answer.user.jinja2``: before, every file was
named after the text up to its first dot, so the second became ``chat_answer_2`` or
``prompts_hello``, names that say nothing.
"""

from __future__ import annotations

from needle_action.config import load_config
from needle_action.scaffold.starter import write_starter
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


def test_a_flag_is_not_taken_for_the_question(tmp_path):
    # the variables of Azure's chat_answer.system.jinja2 (azure-search-openai-demo)
    write(
        tmp_path,
        "prompts/chat_answer.system.jinja2",
        "{% if include_follow_up_questions %}Ask more.{% endif %}"
        "{% for c in citations %}[{{ c }}]{% endfor %}{{ injected_prompt }}\n",
    )
    write(
        tmp_path,
        "prompts/chat_answer.user.jinja2",
        "{{ user_query }}{% for s in text_sources %}{{ s }}{% endfor %}\n",
    )
    config = load_config(write_starter(tmp_path, tmp_path / "needle.toml", force=False))
    assert config.prompts["chat_answer_system"].question_var != "include_follow_up_questions"
    user = config.prompts["chat_answer_user"]
    assert (user.context_var, user.question_var) == ("text_sources", "user_query")
