"""Indexes for searching what was said (webapp.chat.search).

GIN indexes on the words of every message and of every title, in the 'simple' configuration (no
language assumed): expression indexes, so no column is added, and webapp.chat.search repeats
the two expressions exactly, which is what lets PostgreSQL use them. A trigram index (pg_trgm, a
trusted extension that ships with PostgreSQL: the database's owner may create it) finds a piece
of a word, or of a text written without spaces, without reading every message.
"""

from django.db import migrations

MESSAGE_WORDS = "chat_message_content_words"
TITLE_WORDS = "chat_conversation_title_words"
MESSAGE_TRIGRAMS = "chat_message_content_trigrams"


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_message_memories"),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX {MESSAGE_WORDS} ON chat_message "
            "USING gin (to_tsvector('simple', content))",
            reverse_sql=f"DROP INDEX {MESSAGE_WORDS}",
        ),
        migrations.RunSQL(
            f"CREATE INDEX {TITLE_WORDS} ON chat_conversation "
            "USING gin (to_tsvector('simple', title))",
            reverse_sql=f"DROP INDEX {TITLE_WORDS}",
        ),
        # Left in place when unapplied: other database objects may use it by then.
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS pg_trgm", reverse_sql=migrations.RunSQL.noop
        ),
        migrations.RunSQL(
            f"CREATE INDEX {MESSAGE_TRIGRAMS} ON chat_message USING gin (content gin_trgm_ops)",
            reverse_sql=f"DROP INDEX {MESSAGE_TRIGRAMS}",
        ),
    ]
