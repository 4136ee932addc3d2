"""Webhook deliveries handled, in DynamoDB, by X-GitHub-Delivery (kept on a redelivery)."""

from __future__ import annotations

from datetime import datetime

from pynamodb.exceptions import PutError

from trunkwatch.storage import keys
from trunkwatch.storage.items import DeliveryItem
from trunkwatch.storage.records import DELIVERY_TTL
from trunkwatch.storage.table import TableStore


class DynamoDeliveries(TableStore):
    def claim(self, delivery_id: str, event: str, now: datetime) -> bool:
        """Record the delivery; False if it was handled before."""
        try:
            DeliveryItem(
                keys.delivery(delivery_id), "DELIVERY", event=event, expires_at=now + DELIVERY_TTL
            ).save(condition=DeliveryItem.pk.does_not_exist())
        except PutError as err:
            if err.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def release(self, delivery_id: str) -> None:
        """Forget a delivery whose handling failed, so that its redelivery is handled."""
        DeliveryItem(keys.delivery(delivery_id), "DELIVERY").delete()
