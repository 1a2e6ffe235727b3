"""gcloud's list syntax and shell quoting both ways: what the export writes, the import
(and gcloud, whose tokenizer split_list copies) reads back unchanged."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.interop import export
from service.interop.gcloud_flags import join_list, split_list
from service.interop.shell_text import tokens

WORD = st.text(alphabet=st.sampled_from(list("ab ,;:|^=-'\"\\$`!*\n\t")), max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORD, max_size=6).filter(lambda items: not items or items[-1] != ""))
def test_lists_survive_gcloud_syntax(items):
    try:
        value = join_list(items)
    except ValueError:  # every delimiter gcloud could use appears in the items
        return
    assert split_list(value) == items


@settings(max_examples=300, deadline=None)
@given(st.lists(WORD.filter(bool), min_size=1, max_size=6))
def test_command_lines_survive_the_shell(words):
    line = export._command(["gcloud", "ai", "custom-jobs", "create", *words])
    assert tokens(line) == ["gcloud", "ai", "custom-jobs", "create", *words]


def test_what_gcloud_documents():
    assert split_list("a,b,c") == ["a", "b", "c"]
    assert split_list("^:^a,b:c") == ["a,b", "c"]
    assert split_list("^::^a:b::c") == ["a:b", "c"]
    assert split_list("a,b,") == ["a", "b"]


def test_comments_and_continuations():
    text = "# the job's command\ngcloud ai custom-jobs create \\\n  --args='a\\\nb' \\\r\n  --region=x  # it's here\n"
    assert tokens(text) == ["gcloud", "ai", "custom-jobs", "create", "--args=a\\\nb", "--region=x"]
