@PER-1C @requires-periodic-tasks @requires-routing
Feature: Periodic 03 - The message dispatcher

  The message dispatcher receives messages from the transport, validates
  them and buffers them in memory per dialog until its async tasks save them
  to their user queues. On every notification it deletes the out-of-order
  messages and the stale ones: those not picked up within 10 seconds of
  their arrival. Messages from sql1's database "shop" reach sql2's database
  "orders" through sql2's dispatcher.

  Background:
    Given the topology "periodic"
    And dialog "D1" is begun from service "Initiator" to service "Target"

  Scenario: [1] With its tasks running the dispatcher saves a message as it arrives
    Given time passes to second 3
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" at "sql2" shows exactly:
      | second | event               | database |
      | 3      | dispatcher buffered | orders   |
      | 3      | message arrived     | orders   |
    And the dispatcher of "sql2" holds no message

  Scenario: [2] A message never picked up is still buffered at second 10
    Given the dispatcher of "sql2" stops saving messages
    And time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 10
    Then the dispatcher of "sql2" holds 1 message
    And the log for dialog "D1" has no "dispatcher deleted" event

  Scenario: [3] A message never picked up is gone after the notification at second 15
    Given the dispatcher of "sql2" stops saving messages
    And time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 15
    Then the dispatcher of "sql2" holds no message
    And the log for dialog "D1" at "sql2" shows exactly:
      | second | event               | reason |
      | 3      | dispatcher buffered | NULL   |
      | 15     | dispatcher deleted  | stale  |

  Scenario: [4] A message picked up within 10 seconds is saved
    Given the dispatcher of "sql2" saves each message 6 seconds after it arrives
    And time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then the log for dialog "D1" at "sql2" shows exactly:
      | second | event               | database |
      | 3      | dispatcher buffered | orders   |
      | 9      | message arrived     | orders   |
    And the log for dialog "D1" has no "dispatcher deleted" event

  Scenario: [5] A message the saving tasks would pick up after 14 seconds is deleted at the notification before
    Given the dispatcher of "sql2" saves each message 14 seconds after it arrives
    And time passes to second 3
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then the log for dialog "D1" at "sql2" shows exactly:
      | second | event               | reason |
      | 3      | dispatcher buffered | NULL   |
      | 15     | dispatcher deleted  | stale  |
    And the log for dialog "D1" has no "message arrived" event

  Scenario: [6] A message that arrives out of order is deleted by the next notification
    Given the network loses message 0 of dialog "D1"
    And time passes to second 1
    And a message is sent on dialog "D1"
    And time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 9
    Then the log for dialog "D1" at "sql2" shows exactly:
      | second | event               | message_sequence_number | reason       |
      | 2      | dispatcher buffered | 1                       | NULL         |
      | 5      | dispatcher deleted  | 1                       | out of order |
    And the log for dialog "D1" has no "message arrived" event

  Scenario: [7] Messages buffered while saving is stopped are saved in order once it resumes
    Given the dispatcher of "sql2" stops saving messages
    And time passes to second 1
    And 3 messages are sent on dialog "D1"
    And time passes to second 4
    When the dispatcher of "sql2" saves messages again
    Then the log for dialog "D1" at "sql2" shows exactly:
      | second | event           | message_sequence_number |
      | 4      | message arrived | 0                       |
      | 4      | message arrived | 1                       |
      | 4      | message arrived | 2                       |
