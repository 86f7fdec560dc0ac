""" "My data": every user can export their own conversations and feedback, and delete one."""
