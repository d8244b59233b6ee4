@PER-2B @requires-periodic-tasks @requires-routing
Feature: Periodic 05 - The transmitter

  The transmitter associates dialogs with transport connections. On every
  2nd notification it trims its caches and reclassifies the dialogs touched
  by metadata changes, resource limits or route expirations: each is
  unregistered and registers again, so the change is taken into account.
  This can briefly pause their transmission, and it resumes dialogs whose
  transmission failed earlier for resource or security reasons.

  Background:
    Given the topology "periodic"
    And dialog "D1" is begun from service "Initiator" to service "Target"

  Scenario: [1] A dialog that failed for lack of memory resumes at the next 2nd notification
    # a first message opens the connection to sql2, whether a SEND connects at once or at the 2nd notification
    Given a message is sent on dialog "D1"
    And time passes to second 11
    And the transmission of dialog "D1" fails for lack of memory
    And a message is sent on dialog "D1"
    When time passes to second 22
    Then the log for dialog "D1" shows exactly from second 11:
      | second | event               | instance |
      | 20     | message transmitted | sql1     |
      | 20     | message arrived     | sql2     |
    And the log at "sql1" shows exactly from second 20 until second 20:
      | event                    | dialogs |
      | transmitter reclassified | D1      |

  Scenario: [2] A dialog that failed security validation resumes at the next 2nd notification
    Given a message is sent on dialog "D1"
    And time passes to second 12
    And the transmission of dialog "D1" fails security validation
    And a message is sent on dialog "D1"
    When time passes to second 22
    Then the log for dialog "D1" shows exactly from second 11:
      | second | event               |
      | 20     | message transmitted |

  Scenario: [3] A route change is taken up by waiting dialogs at the next 2nd notification
    Given instance "sql2" cannot be reached
    And time passes to second 1
    And a message is sent on dialog "D1"
    And time passes to second 12
    And in database "shop" of "sql1": ALTER ROUTE ToOrders WITH ADDRESS = 'LOCAL'
    When time passes to second 25
    Then the log for dialog "D1" shows exactly:
      | second | event           | instance | database |
      | 20     | message arrived | sql1     | stock    |
    # it never crossed the transport, so the dispatcher (PER-1C) never had it
    And the log for dialog "D1" has no "dispatcher buffered" event
    And the log at "sql1" shows exactly from second 1:
      | second | event         | database | route    |
      | 12     | route altered | shop     | ToOrders |

  Scenario: [4] A route expiration is taken up by waiting dialogs at the next 2nd notification
    Given instance "sql2" cannot be reached
    And the routes in database "shop" of "sql1" are:
      | name             | service_name | address                 | lifetime_s |
      | ToOrders         | Target       | TCP://sql2.example:4022 | 15         |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 1
    And a message is sent on dialog "D1"
    When time passes to second 25
    Then the log for dialog "D1" shows exactly:
      | second | event           | instance | database |
      | 20     | message arrived | sql1     | stock    |

  Scenario: [5] Dialogs nothing touched are not reclassified
    Given instance "sql2" cannot be reached
    And time passes to second 1
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then the log at "sql1" shows exactly:
      | second | event                    | dialogs |
      | 10     | transmitter reclassified | (none)  |
      | 20     | transmitter reclassified | (none)  |
      | 30     | transmitter reclassified | (none)  |
    And the log for dialog "D1" shows first:
      | second | event                | status                                            |
      | 1      | transmission pending | waiting for a connection to TCP://sql2.example:4022 |

  Scenario: [6] A route expiration touches the waiting dialogs once, at the next 2nd notification, and not again
    Given instance "sql2" cannot be reached
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | lifetime_s |
      | ToOrders | Target       | TCP://sql2.example:4022 | 20         |
      | Lasting  | Target       | TCP://sql2.example:4022 |            |
    And time passes to second 1
    And a message is sent on dialog "D1"
    When time passes to second 35
    # the route table was replaced at second 0, a metadata change: the transmitter "reclassifies all or selected
    # dialogs" after it, so D1, sent after the change, may be among them at 10
    Then the log at "sql1" shows exactly:
      | second | event                    | dialogs      |
      | 10     | transmitter reclassified | (none) or D1 |
      | 20     | transmitter reclassified | D1           |
      | 30     | transmitter reclassified | (none)       |
    And the log for dialog "D1" has no "message arrived" event

  Scenario: [7] A route change in another instance does not touch the dialogs waiting in this one
    Given instance "sql2" cannot be reached
    And time passes to second 1
    And a message is sent on dialog "D1"
    And time passes to second 12
    And in database "orders" of "sql2": CREATE ROUTE Back WITH SERVICE_NAME = 'Initiator', ADDRESS = 'TCP://sql1.example:4022'
    When time passes to second 35
    # sql2's transmitter takes up its own change at 20; sql1's message still waits for its connection, untouched
    Then the log for dialog "D1" has no "routing retried" event
    And the transmission queue of "sql1" holds 1 message

  # The broker "first runs everything that fell due up to that time ... and then applies the command"
  # (docs/protocol.md, execute): at second 20 the transmitter has already run when the two dialogs fail, so
  # neither is resumed before the 2nd notification at 30; D1 fails while D2's message already waits, failed, in
  # the transmission queue, and each is resumed on its own account
  Scenario: [8] Dialogs that fail at the instant of a 2nd notification, one while the other's message waits, resume at the next
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    # a first message opens the connection to sql2, whether a SEND connects at once or at the 2nd notification
    And a message is sent on dialog "D1"
    And time passes to second 20
    And the transmission of dialog "D2" fails for lack of memory
    And a message is sent on dialog "D2"
    And the transmission of dialog "D1" fails security validation
    And a message is sent on dialog "D1"
    When time passes to second 35
    Then the log for dialog "D1" shows exactly from second 20:
      | second | event               | instance | message_sequence_number |
      | 30     | message transmitted | sql1     | 1                       |
      | 30     | message arrived     | sql2     | 1                       |
    And the log for dialog "D2" shows exactly from second 20:
      | second | event               | instance | message_sequence_number |
      | 30     | message transmitted | sql1     | 0                       |
      | 30     | message arrived     | sql2     | 0                       |
    And the log at "sql1" shows exactly from second 20 until second 20:
      | event                    | dialogs |
      | transmitter reclassified | (none)  |
    And the transmission queue of "sql1" holds no message

  # "No other dialog is: none where nothing changed, expired or failed" (docs/implementing.md section 5, PER-2B:
  # "reclassifies all or selected dialogs as a side-effect of any metadata changes, resource ... limitations and
  # route expirations"): a route whose lifetime has not run out has not expired, and another dialog's failure
  # touches that dialog alone. D1 began to wait after the table's replacement was taken up at 10.
  Scenario: [9] Beside a route whose lifetime has not run out and a failed dialog, a dialog nothing touched is not reclassified
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And instance "sql2" cannot be reached
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | lifetime_s |
      | ToOrders | Target       | TCP://sql2.example:4022 |            |
      | Later    | Elsewhere    | LOCAL                   | 100        |
    And time passes to second 11
    And a message is sent on dialog "D1"
    And time passes to second 21
    And the transmission of dialog "D2" fails for lack of memory
    And a message is sent on dialog "D2"
    When time passes to second 35
    Then the log at "sql1" shows exactly from second 11:
      | second | event                    | dialogs |
      | 20     | transmitter reclassified | (none)  |
      | 30     | transmitter reclassified | D2      |
    And the log for dialog "D1" has no "routing retried" event

  # fail_transmission (docs/protocol.md): "A message of the dialog that such a transmitter would send waits there,
  # failed, until that instance's transmitter reclassifies the dialog" - also one that waited for its connection
  # when the connection opens. D2's SEND at 63 may open it (sql1's attempt at 1 suppressed the address until 61,
  # PER-2A), and what waits for it may go on it at once or at the next 2nd notification: D1's message, failed at 62,
  # goes at neither, not before sql1's transmitter reclassifies D1 at 70 (when it goes after that is left open here).
  Scenario: [10] A failed dialog's message that waited for its connection does not go on it before the dialog is reclassified
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And instance "sql2" cannot be reached
    And time passes to second 1
    And a message is sent on dialog "D1"
    And time passes to second 61.5
    And instance "sql2" can be reached again
    And time passes to second 62
    And the transmission of dialog "D1" fails for lack of memory
    And time passes to second 63
    And a message is sent on dialog "D2"
    When time passes to second 85
    Then the log for dialog "D1" has no "message transmitted" event until second 69.9
    And the log for dialog "D2" has 1 "message arrived" event
