@PER-5B @requires-forwarding @requires-periodic-tasks @requires-routing
Feature: Periodic 06 - The message forwarder

  Forwarded messages are held in memory and never persisted in a queue. On
  every 5th notification the forwarder deletes the messages it could not
  forward within 60 seconds of receiving them. Here sql1 sends Target's
  messages to the forwarder sql5, which sends them on to sql2.

  sql1 may send a message again while it has not arrived (the documents
  neither ask nor forbid it), so the forwarder may hold copies of it, each
  received when it came: the scenarios speak of the copies received by a
  given second, and of the first deletions.

  Background:
    Given the topology "periodic"
    And dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name | service_name | address                 |
      | Via5 | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name | service_name | address                 |
      | To2  | Target       | TCP://sql2.example:4022 |
    And instance "sql2" cannot be reached

  Scenario: [1] A message that cannot be forwarded yet is held in memory, in no queue
    Given time passes to second 3
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the forwarder of "sql5" holds message D1:0 received by second 10
    And the transmission queue of "sql5" holds no message

  Scenario: [2] It is still held at the 5th notification at second 50
    Given time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 74
    Then the forwarder of "sql5" holds message D1:0 received by second 10

  Scenario: [3] It is deleted by the 5th notification at second 75, 72 seconds after it arrived
    Given time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 75
    Then the forwarder of "sql5" holds no copy of message D1:0 received by second 15
    And the log for dialog "D1" shows first:
      | second | event                     | instance |
      | 75     | forwarded message deleted | sql5     |

  Scenario: [4] A message forwarded before the 5th notification that would find it stale is not deleted
    Given time passes to second 3
    And a message is sent on dialog "D1"
    And time passes to second 15
    And instance "sql2" can be reached again
    When time passes to second 100
    # forwarded at second 70 after the attempt that failed at 3 (PER-2A); at 20 if the first attempt came at 20
    Then the log for dialog "D1" shows exactly from second 0 until second 74:
      | event           | instance |
      | message arrived | sql2     |
    And the log for dialog "D1" has no "forwarded message deleted" event

  # Whether a message held exactly 60 seconds "could not be forwarded within 60 seconds" the documents do not
  # say: D2's goes at 75 or at the 5th notification after it.
  Scenario: [5] A message a millisecond over 60 seconds old at the 5th notification is deleted, one a millisecond under is kept
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And dialog "D3" is begun from service "Initiator" to service "Target"
    And dialog "D4" is begun from service "Initiator" to service "Target"
    # D1's message opens sql1's connection to the forwarder by second 10, whether a SEND connects at once or when
    # notified, so the other messages reach sql5 the moment they are sent
    And a message is sent on dialog "D1"
    And time passes to second 14.999
    And a message is sent on dialog "D4"
    And time passes to second 15
    And a message is sent on dialog "D2"
    And time passes to second 15.001
    And a message is sent on dialog "D3"
    When time passes to second 75
    Then the log for dialog "D4" shows first:
      | second | event                     | instance |
      | 75     | forwarded message deleted | sql5     |
    And the log for dialog "D2" has no "forwarded message deleted" event until second 74.999
    And the log for dialog "D3" has no "forwarded message deleted" event
    And the forwarder of "sql5" holds message D3:0 received by second 15.001
    And the forwarder of "sql5" holds no copy of message D4:0 received by second 14.999

  Scenario: [6] A route change in another instance does not touch the message the forwarder holds
    Given time passes to second 3
    And a message is sent on dialog "D1"
    And time passes to second 12
    And in database "shop" of "sql1": ALTER ROUTE Via5 WITH ADDRESS = 'TCP://sql5.example:4022'
    When time passes to second 75
    Then the forwarder of "sql5" holds no copy of message D1:0 received by second 15
    And the log for dialog "D1" shows first:
      | second | event                     | instance |
      | 75     | forwarded message deleted | sql5     |
    # sql5's transmitter has nothing to take up again (PER-2B): the change was sql1's
    And the log for dialog "D1" at "sql5" has no "routing retried" event

  Scenario: [7] A message the forwarder has no route for is matched again and again, and still deleted 60 seconds after it arrived
    # no route names Target at sql5: the message waits there as delayed and is matched again every delayed_retry_s
    # (RTM-8); its 60 seconds run from its arrival at sql5 (at second 3, or at 10 if sql1 connects when notified),
    # not from its last matching
    Given the routes in msdb of "sql5" are:
      | name  | service_name | address                 |
      | Other | Elsewhere    | TCP://sql2.example:4022 |
    And time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 75
    Then the log for dialog "D1" shows first:
      | second | event                     | instance |
      | 75     | forwarded message deleted | sql5     |
    And the forwarder of "sql5" holds no copy of message D1:0 received by second 15

  # "within 60 seconds of being received": counted from when the forwarder received the message.
  Scenario: [8] A message that reaches the forwarder long after it was sent is kept 60 seconds from its arrival
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    # D1's message opens sql1's connection to the forwarder by second 10, whether a SEND connects at once or when
    # notified
    And a message is sent on dialog "D1"
    And time passes to second 12
    And the connection from "sql1" to "TCP://sql5.example:4022" drops
    And time passes to second 13
    And a message is sent on dialog "D2"
    When time passes to second 99.999
    # it reaches sql5 once sql1 may connect again: at the 2nd notification at 30, or when a broker that sends
    # it again does so after second 27
    Then the forwarder of "sql5" holds message D2:0 received by second 30
    And the forwarder of "sql5" holds no copy of message D2:0 received by second 26.999
    # 62 seconds after the SEND at the 5th notification at 75, but under 49 after it arrived
    And the log for dialog "D2" has no "forwarded message deleted" event
