"""Notification channels: one module per receiver behind one interface."""
