@requires-periodic-tasks @requires-routing
Feature: Periodic 04 - Transport connections

  On every 2nd notification the transport tries to connect to the remote
  destinations that have pending messages and are not suppressed. A
  destination is suppressed for 15 seconds after a disconnection and for 60
  seconds after each unsuccessful connection attempt. On every 5th
  notification it closes the connections that have been idle for the past
  90 seconds. Whether the last instant of such a span counts the documents
  do not say: where a span ends exactly at a notification, what happens at
  it or at the next is accepted alike, and a span that ends a moment before
  or after a notification settles it. sql1 sends dialog D1's messages to sql2 by the route ToOrders.

  An instance that "cannot be reached" is the kit's own network fault: the
  kit knows when it made it, so a broker is not asked to report it. When a
  broker notices that its connection to such an instance is broken, at once
  or when it next uses the connection, the documents do not say; the
  scenarios accept both.

  Background:
    Given the topology "periodic"
    And dialog "D1" is begun from service "Initiator" to service "Target"
    And a message is sent on dialog "D1"
    And time passes to second 11

  @PER-2A
  Scenario: [1] After a disconnection the destination is left alone for 15 seconds, then tried on the next 2nd notification
    Given time passes to second 12
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And time passes to second 13
    And a message is sent on dialog "D1"
    When time passes to second 35
    Then the log at "sql1" shows exactly from second 12:
      | second | event               | result    | reason       |
      | 12     | connection closed   | NULL      | disconnected |
      | 30     | connection attempt  | connected | NULL         |
    And the log for dialog "D1" at "sql2" shows exactly from second 12:
      | second | event           | message_sequence_number |
      | 30     | message arrived | 1                       |

  @PER-2A
  Scenario: [2] A destination whose attempt fails at second 30 is not tried at 40, 50, 60, 70 or 80 and is tried when its 60 seconds are over
    Given time passes to second 12
    And instance "sql2" cannot be reached
    And time passes to second 13
    And a message is sent on dialog "D1"
    When time passes to second 100
    # the connection closes when the network fails, or when the message sent at 13 finds it broken
    Then the log at "sql1" has 1 "connection closed" event where reason is "disconnected" from second 12 until second 13
    And the log at "sql1" shows exactly from second 13.001 until second 100:
      | second    | event              | result  |
      | 30        | connection attempt | refused |
      | 90 or 100 | connection attempt | refused |
    And the transmission queue of "sql1" holds 1 message

  @PER-2A
  Scenario: [3] Once the destination answers again, the pending messages go at the first attempt after suppression
    Given time passes to second 12
    And instance "sql2" cannot be reached
    And time passes to second 13
    And 2 messages are sent on dialog "D1"
    And time passes to second 40
    And instance "sql2" can be reached again
    When time passes to second 100
    Then the log for dialog "D1" at "sql2" shows exactly from second 12:
      | second    | event           | message_sequence_number |
      | 90 or 100 | message arrived | 1                       |
      | 90 or 100 | message arrived | 2                       |
    And the transmission queue of "sql1" holds no message

  @PER-2A
  Scenario: [4] Destinations with no pending message are not tried
    Given time passes to second 12
    And instance "sql2" cannot be reached
    When time passes to second 200
    Then the log at "sql1" has no "connection attempt" event from second 12

  @PER-5A
  Scenario: [5] A connection idle since the start is still open at second 75
    When time passes to second 76
    Then "sql1" has a connection to "TCP://sql2.example:4022"

  @PER-5A
  Scenario: [6] The notification at second 100 closes a connection idle since the start
    When time passes to second 100
    Then "sql1" has no connection to "TCP://sql2.example:4022"
    And the log at "sql1" shows exactly:
      | second | event             | reason |
      | 100    | connection closed | idle   |

  @PER-5A
  Scenario: [7] A connection in use is not closed; it closes 90 seconds after its last message, at a 5th notification
    Given time passes to second 50
    And a message is sent on dialog "D1"
    When time passes to second 160
    Then the log at "sql1" shows exactly:
      | second | event             | reason |
      | 150    | connection closed | idle   |

  @informative
  Scenario: [8] The reference engine connects at once when a message is sent to an unsuppressed destination
    Then the log at "sql1" shows exactly:
      | second | event              | result    |
      | 0      | connection attempt | connected |

  @PER-2A
  Scenario: [9] A destination whose suppression ends at second 32 is tried at the 2nd notification at 40, not at 35
    Given time passes to second 17
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And a message is sent on dialog "D1"
    When time passes to second 45
    Then the log at "sql1" shows exactly from second 12:
      | second | event              | result    | reason       |
      | 17     | connection closed  | NULL      | disconnected |
      | 40     | connection attempt | connected | NULL         |
    And the log for dialog "D1" at "sql2" shows exactly from second 12:
      | second | event           | message_sequence_number |
      | 40     | message arrived | 1                       |

  @PER-2A
  Scenario: [10] A destination whose 15 seconds end exactly at the 2nd notification at second 30 is not tried by a SEND just before
    Given time passes to second 15
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And time passes to second 29.99
    And a message is sent on dialog "D1"
    When time passes to second 45
    Then the log at "sql1" shows exactly from second 12:
      | second   | event              | address                 | result    | reason       |
      | 15       | connection closed  | TCP://sql2.example:4022 | NULL      | disconnected |
      | 30 or 40 | connection attempt | TCP://sql2.example:4022 | connected | NULL         |

  @PER-2A
  Scenario: [11] After an attempt fails at second 30, a SEND at second 89.99 does not try the destination; a notification once the 60 seconds are over does
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And time passes to second 12
    And instance "sql2" cannot be reached
    And time passes to second 13
    And a message is sent on dialog "D1"
    And time passes to second 89.99
    # another dialog: a second message of D1 would only queue behind the first
    And a message is sent on dialog "D2"
    When time passes to second 100
    Then the log at "sql1" shows exactly from second 13:
      | second    | event              | address                 | result  |
      | 30        | connection attempt | TCP://sql2.example:4022 | refused |
      | 90 or 100 | connection attempt | TCP://sql2.example:4022 | refused |

  @PER-5A
  Scenario: [12] A connection idle for exactly 90 seconds at a 5th notification closes at it or at the next
    Given time passes to second 35
    And a message is sent on dialog "D1"
    When time passes to second 150
    Then the log at "sql1" shows exactly:
      | second     | event             | address                 | reason |
      | 125 or 150 | connection closed | TCP://sql2.example:4022 | idle   |

  @PER-5A
  Scenario: [13] A connection idle for 89.95 seconds at a 5th notification stays open until the next one
    Given time passes to second 35.05
    And a message is sent on dialog "D1"
    When time passes to second 155
    Then the log at "sql1" shows exactly:
      | second | event             | reason |
      | 150    | connection closed | idle   |

  @PER-2A
  Scenario: [14] An instance that cannot be reached loses its connections, and only its own
    Given dialog "D2" is begun from service "Initiator" to service "Vault"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
      | ToVault  | Vault        | TCP://sql5.example:4022 |
    And a message is sent on dialog "D2"
    And time passes to second 21
    And instance "sql2" cannot be reached
    # the connection closes when the network fails, or when the next message finds it broken
    When a message is sent on dialog "D1"
    Then "sql1" has no connection to "TCP://sql2.example:4022"
    And "sql1" has a connection to "TCP://sql5.example:4022"

  @PER-2A
  Scenario: [15] An instance that cannot be reached leaves the connections to the others open
    Given dialog "D2" is begun from service "Initiator" to service "Vault"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
      | ToVault  | Vault        | TCP://sql5.example:4022 |
    And a message is sent on dialog "D2"
    And time passes to second 21
    And instance "sql5" cannot be reached
    # D2's first message waits at sql5, which has no route for Vault, and its next would queue behind it
    And dialog "D3" is begun from service "Initiator" to service "Vault"
    When a message is sent on dialog "D3"
    Then "sql1" has no connection to "TCP://sql5.example:4022"
    And "sql1" has a connection to "TCP://sql2.example:4022"

  @PER-2A
  Scenario: [16] A destination whose 15 seconds end a moment before the 2nd notification at second 30 is tried at it
    Given time passes to second 14.99
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And time passes to second 29.98
    And a message is sent on dialog "D1"
    When time passes to second 35
    Then the log at "sql1" shows exactly from second 12:
      | second | event              | address                 | result    | reason       |
      | 14.99  | connection closed  | TCP://sql2.example:4022 | NULL      | disconnected |
      | 30     | connection attempt | TCP://sql2.example:4022 | connected | NULL         |

  @PER-2A
  Scenario: [17] A destination whose 15 seconds end a moment after the 2nd notification at second 30 is tried at the next
    Given time passes to second 15.01
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And time passes to second 29.98
    And a message is sent on dialog "D1"
    When time passes to second 45
    Then the log at "sql1" shows exactly from second 12:
      | second | event              | address                 | result    | reason       |
      | 15.01  | connection closed  | TCP://sql2.example:4022 | NULL      | disconnected |
      | 40     | connection attempt | TCP://sql2.example:4022 | connected | NULL         |

  @PER-5A
  Scenario: [18] A connection idle for 90.05 seconds at a 5th notification closes at it
    Given time passes to second 34.95
    And a message is sent on dialog "D1"
    When time passes to second 130
    Then the log at "sql1" shows exactly:
      | second | event             | address                 | reason |
      | 125    | connection closed | TCP://sql2.example:4022 | idle   |

  @PER-2A
  Scenario: [19] A second failed attempt in a row suppresses the destination for another 60 seconds
    Given time passes to second 12
    And instance "sql2" cannot be reached
    And time passes to second 13
    And a message is sent on dialog "D1"
    When time passes to second 175
    Then the log at "sql1" shows exactly from second 13.001:
      | second            | event              | result  |
      | 30                | connection attempt | refused |
      | 90 or 100         | connection attempt | refused |
      | 150 or 160 or 170 | connection attempt | refused |

  # "On every 5th notification it closes the connections that have been idle for the past 90 seconds" (periodic
  # tasks, every 5th notification): a connection opened again after such a close is watched like any other. The
  # message at second 112 goes at once or at the 2nd notification at 120, so its connection is idle for 90
  # seconds from second 112 to 120 or a little later: the close comes at one of the 5th notifications 205 to 225
  @PER-5A
  Scenario: [20] A connection closed for idleness, then opened again, closes again once idle for 90 seconds
    Given time passes to second 112
    And a message is sent on dialog "D1"
    When time passes to second 240
    Then the log at "sql1" shows exactly:
      | second            | event             | reason |
      | 100               | connection closed | idle   |
      | 205 or 210 or 225 | connection closed | idle   |

  # At second 50 the 10th notification has run its tasks - the transport's connections (every 2nd), the
  # transmitter (every 2nd), the idle connections (every 5th) - before the broker "applies the command"
  # (docs/protocol.md, execute): the failed message then waits in sql1's transmission queue when the connection
  # drops. The transmitter resumes it at the next 2nd notification at 60 (PER-2B), but the destination is
  # suppressed until 65; the transport tries it at the 2nd notification at 70. "On every 5th notification it
  # closes the connections that have been idle for the past 90 seconds": the new connection, last used at 70, is
  # idle for 90 seconds at 160, and closes at the 5th notification at 175, not at 100 or 150 by the old one's clock.
  @PER-2A @PER-5A @PER-2B
  Scenario: [21] A connection that drops at the instant of the 10th notification, with a message waiting, is tried again at 70 and watched for idleness from then
    Given time passes to second 50
    And the transmission of dialog "D1" fails for lack of memory
    And a message is sent on dialog "D1"
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    When time passes to second 180
    Then the log at "sql1" shows exactly from second 49:
      | second | event              | address                 | result    | reason       |
      | 50     | connection closed  | TCP://sql2.example:4022 | NULL      | disconnected |
      | 70     | connection attempt | TCP://sql2.example:4022 | connected | NULL         |
      | 175    | connection closed  | TCP://sql2.example:4022 | NULL      | idle         |
    And the log for dialog "D1" at "sql2" shows exactly from second 49:
      | second | event           | message_sequence_number |
      | 70     | message arrived | 1                       |
    And the transmission queue of "sql1" holds no message

  # "Once notified, it attempts to establish connections with remote destinations that have pending messages and
  # are not currently suppressed": with every such destination, two at one notification as one alone. D2 and D3
  # go to stock on sql1 by way of the forwarder sql5, and every message before the drops is acknowledged, so a
  # broker that sends again what is not acknowledged (resend_after_s) has nothing to send between them
  @PER-2A
  Scenario: [22] Two destinations left alone after their disconnections are both tried at the same 2nd notification
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | broker_instance | address                 |
      | ToOrders | Target       |                 | TCP://sql2.example:4022 |
      | ToStock  | Target       | sql1.stock      | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name | broker_instance | address                 |
      | ToStock | Target       | sql1.stock      | TCP://sql1.example:4022 |
    And dialog "D2" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And a message is sent on dialog "D2"
    And time passes to second 21
    And the connection from "sql1" to "TCP://sql2.example:4022" drops
    And the connection from "sql1" to "TCP://sql5.example:4022" drops
    And time passes to second 22
    And a message is sent on dialog "D1"
    And dialog "D3" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And a message is sent on dialog "D3"
    When time passes to second 45
    Then the log at "sql1" shows exactly from second 21.001:
      | second | event              | address                 | result    |
      | 40     | connection attempt | TCP://sql2.example:4022 | connected |
      | 40     | connection attempt | TCP://sql5.example:4022 | connected |
