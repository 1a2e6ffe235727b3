"""Webhooks: per-team subscriptions to job events, delivered by the controller.

events       which event types a job change makes, and their payloads (standard, slack)
outbox       the lifecycle listener: one delivery row per event per subscription, written in
             the transaction of the change itself (none lost, none for a rolled-back change)
destinations which addresses a webhook may be sent to (checked at creation and at every send)
signing      Standard Webhooks signatures and secrets
sender       one HTTP attempt, to the address that was checked, under one deadline
dispatcher   the controller's loop service: sends due deliveries, retries with backoff
service      subscriptions, the delivery log, redelivery (router: /v1/webhooks)
"""
