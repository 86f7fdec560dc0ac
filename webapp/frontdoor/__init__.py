"""The browser's chat: its pages, the websocket that streams answers, and the admin pages of
conversations, messages and feedback.

They show what the learning loop made of each answer and delete through "My data", so they sit
above chat, learning and privacy; webapp/chat itself (conversations, their services and
selectors) imports neither.
"""
