"""Ready samples whose turn holds a secret are set aside with the reason, as new ones are."""

from django.db import migrations


def set_aside(apps, schema_editor):
    from webapp.learning.secret_guard import turn_secret

    Sample = apps.get_model("learning", "Sample")
    for sample in Sample.objects.filter(status="ready").select_related("message", "judgement"):
        reason = turn_secret(
            prompt_messages=sample.prompt_messages,
            texts={
                "the answer": sample.message.content,
                "the next message": sample.judgement.next_state_text,
                "the correction": sample.correction,
                "the judge's hint": sample.hint,
            },
        )
        if reason:
            sample.status = "excluded"
            sample.exclusion_reason = reason
            sample.save(update_fields=["status", "exclusion_reason"])


class Migration(migrations.Migration):
    dependencies = [("learning", "0010_alternativesjob")]

    operations = [migrations.RunPython(set_aside, migrations.RunPython.noop)]
