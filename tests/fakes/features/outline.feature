@requires-activation
Feature: Outline - a user's Scenario Outline whose first example fails

  A user's feature in the kit's steps: the first example asks for three
  readers where MAX_QUEUE_READERS allows two, so it fails; the other two pass.

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
  Scenario Outline: [1] Orders are taken by <readers> procedures
    Given a message is sent on dialog "O1"
    And a message is sent on dialog "O2"
    When a message is sent on dialog "O3"
    Then <readers> activated tasks run for queue "OrderQueue"

    Examples:
      | readers |
      | 3       |
      | 2       |

    Examples: once more
      | readers |
      | 2       |
