"""Ready samples whose turn holds a secret are set aside with the reason, as new ones are."""

from django.db import migrations


def set_aside(apps, schema_editor):
    from webapp.learning.secret_guard import tool_call_texts, turn_secret

    Sample = apps.get_model("learning", "Sample")
    Feedback = apps.get_model("chat", "Feedback")
    ready = (
        Sample.objects.filter(status="ready")
        .select_related("message__conversation", "judgement")
        .only(
            "prompt_messages",
            "correction",
            "hint",
            "message__content",
            "message__reasoning",
            "message__tool_calls",
            "message__conversation__owner_id",
            "judgement__next_state_text",
        )
    )
    for sample in ready.iterator(chunk_size=200):
        message = sample.message
        comment = (
            Feedback.objects.filter(message=message, author_id=message.conversation.owner_id)
            .values_list("comment", flat=True)
            .first()
        )
        reason = turn_secret(
            prompt_messages=sample.prompt_messages,
            texts={
                "the answer": message.content,
                "the answer's reasoning": message.reasoning,
                "the answer's tool calls": "\n".join(tool_call_texts(message.tool_calls)),
                "the correction": sample.correction,
                "the comment": comment,
                "the next message": sample.judgement.next_state_text,
                "the judge's hint": sample.hint,
            },
        )
        if reason:
            Sample.objects.filter(pk=sample.pk, status="ready").update(
                status="excluded", exclusion_reason=reason
            )


class Migration(migrations.Migration):
    dependencies = [("learning", "0010_alternativesjob"), ("chat", "0004_message_unseen_turn")]

    operations = [migrations.RunPython(set_aside, migrations.RunPython.noop)]
