@orders @requires-activation
Feature: Orders - the order queue's activation

  The order service reads OrderQueue with the procedure "take_order", at
  most two at a time. This project checks its own queue configuration with
  the kit's steps.

  Background:
    Given the topology:
      """
      instances:
        shop1:
          address: TCP://shop1.example:4022
          databases:
            orders:
              broker_instance: 0B2C7E1A-5D4F-4E36-9A8B-1C2D3E4F5A6B
              procedures:
                take_order: {receives: false}
              queues:
                FrontQueue: {}
                OrderQueue:
                  activation: {status: ON, procedure_name: take_order, max_queue_readers: 2}
              services:
                Front: {queue: FrontQueue}
                Orders: {queue: OrderQueue}
      """
    And dialog "O1" is begun from service "Front" to service "Orders"
    And dialog "O2" is begun from service "Front" to service "Orders"
    And dialog "O3" is begun from service "Front" to service "Orders"

  @ACT-10
  Scenario: [1] Orders are taken by two procedures at most
    Given a message is sent on dialog "O1"
    And a message is sent on dialog "O2"
    When a message is sent on dialog "O3"
    Then 2 activated tasks run for queue "OrderQueue"
