@requires-activation
Feature: Activation 01 - Queue monitors

  Service Broker creates a queue monitor for each queue with activation
  STATUS = ON or for which a QUEUE_ACTIVATION event notification has been
  registered; sys.dm_broker_queue_monitors lists them. Each monitor tracks
  whether the queue holds messages ready for RECEIVE, how recently a RECEIVE
  returned an empty result set, and how many activation procedures run.

  Background:
    Given the topology "activation"

  @ACT-02 @ACT-03
  Scenario: [1] A queue with activation STATUS ON has a queue monitor
    Then queue "StallQueue" has a queue monitor

  @ACT-02 @ACT-03
  Scenario: [2] A queue with a QUEUE_ACTIVATION event notification has a queue monitor
    Then queue "ExternalQueue" has a queue monitor

  @ACT-02 @ACT-03
  Scenario: [3] A queue with neither has no queue monitor
    Then queue "PlainQueue" has no queue monitor
    And queue "InitiatorQueue" has no queue monitor

  @ACT-02
  Scenario: [4] Turning activation off removes the queue monitor
    When ALTER QUEUE "StallQueue" WITH ACTIVATION (STATUS = OFF)
    Then queue "StallQueue" has no queue monitor

  @ACT-02
  Scenario: [5] Turning activation on creates a queue monitor
    When ALTER QUEUE "PlainQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 1)
    Then queue "PlainQueue" has a queue monitor

  @ACT-02
  Scenario: [6] Creating a QUEUE_ACTIVATION event notification creates a queue monitor
    When CREATE EVENT NOTIFICATION "Watcher" ON QUEUE "PlainQueue" FOR QUEUE_ACTIVATION
    Then queue "PlainQueue" has a queue monitor

  @ACT-02
  Scenario: [7] Dropping the last QUEUE_ACTIVATION event notification removes the queue monitor
    When DROP EVENT NOTIFICATION "ExternalActivator" ON QUEUE "ExternalQueue"
    Then queue "ExternalQueue" has no queue monitor

  @ACT-02
  Scenario: [8] Turning activation off keeps the monitor of a queue that still has a notification
    When ALTER QUEUE "DualQueue" WITH ACTIVATION (STATUS = OFF)
    Then queue "DualQueue" has a queue monitor

  @ACT-02
  Scenario: [9] Dropping the notification keeps the monitor of a queue with activation on
    When DROP EVENT NOTIFICATION "DualActivator" ON QUEUE "DualQueue"
    Then queue "DualQueue" has a queue monitor

  @ACT-04
  Scenario: [10] The monitor records when a RECEIVE returned an empty result set
    Given time passes to second 3
    When session "S1" receives from queue "StallQueue"
    Then session "S1" got an empty result
    And sys.dm_broker_queue_monitors shows for queue "StallQueue":
      | last_empty_rowset_time | second 3 |
      | last_activated_time    | NULL     |
      | tasks_waiting          | 0        |

  @ACT-04
  Scenario: [11] A RECEIVE that returns rows leaves the empty-result time alone
    Given dialog "D1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "D1"
    And ALTER QUEUE "PlainQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 0)
    And time passes to second 2
    When session "S1" receives from queue "PlainQueue"
    Then session "S1" got the message D1:0
    And sys.dm_broker_queue_monitors shows for queue "PlainQueue":
      | last_empty_rowset_time | NULL |

  @ACT-04 @ACT-11
  Scenario: [12] The monitor counts the procedures it started and when it last activated
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And time passes to second 4
    When a message is sent on dialog "D1"
    Then sys.dm_broker_queue_monitors shows for queue "StallQueue":
      | last_activated_time | second 4 |
    And 1 activated task runs for queue "StallQueue"

  @ACT-04
  Scenario: [13] The monitor counts the sessions waiting in RECEIVE
    Given time passes to second 1
    When session "S1" receives from queue "StallQueue" waiting up to 30 seconds
    Then session "S1" is waiting
    And sys.dm_broker_queue_monitors shows for queue "StallQueue":
      | tasks_waiting          | 1    |
      | last_empty_rowset_time | NULL |
