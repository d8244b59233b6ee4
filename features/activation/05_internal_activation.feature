@requires-activation
Feature: Activation 05 - Internal activation

  For internal activation the queue monitor starts a new instance of the
  activation stored procedure when activation is necessary and fewer
  instances than MAX_QUEUE_READERS run; at or above MAX_QUEUE_READERS it
  starts none. sys.dm_broker_activated_tasks lists the procedures started.

  StallQueue's procedure "stall" never RECEIVEs; it runs until the scenario
  makes it exit. Its MAX_QUEUE_READERS is 3.

  Background:
    Given the topology "activation"
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And dialog "D3" is begun from service "Initiator" to service "StallService"
    And dialog "D4" is begun from service "Initiator" to service "StallService"

  @ACT-10
  Scenario: [1] Below MAX_QUEUE_READERS each necessary activation starts a procedure
    Given a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    When a message is sent on dialog "D3"
    Then 3 activated tasks run for queue "StallQueue"

  @ACT-10
  Scenario: [2] At MAX_QUEUE_READERS no further procedure starts
    Given a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    And a message is sent on dialog "D3"
    And a message is sent on dialog "D4"
    When time passes to second 60
    Then 3 activated tasks run for queue "StallQueue"
    And the log for queue "StallQueue" has no "procedure started" event from second 1

  @ACT-10
  Scenario: [3] MAX_QUEUE_READERS 0 starts no procedure at all
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 0)
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then no activated task runs for queue "StallQueue"
    And the log for queue "StallQueue" shows exactly:
      | second | event                | reason            |
      | 0      | activation necessary | NULL              |
      | 0      | activation withheld  | MAX_QUEUE_READERS |
      | 5      | activation necessary | NULL              |
      | 5      | activation withheld  | MAX_QUEUE_READERS |
      | 10     | activation necessary | NULL              |
      | 10     | activation withheld  | MAX_QUEUE_READERS |
      | 15     | activation necessary | NULL              |
      | 15     | activation withheld  | MAX_QUEUE_READERS |
      | 20     | activation necessary | NULL              |
      | 20     | activation withheld  | MAX_QUEUE_READERS |
      | 25     | activation necessary | NULL              |
      | 25     | activation withheld  | MAX_QUEUE_READERS |
      | 30     | activation necessary | NULL              |
      | 30     | activation withheld  | MAX_QUEUE_READERS |

  @ACT-10
  Scenario: [4] A procedure exiting below the maximum makes room for the next activation
    Given a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    And a message is sent on dialog "D3"
    And a message is sent on dialog "D4"
    And time passes to second 2
    When activated task 2 of queue "StallQueue" exits
    And time passes to second 6
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 0      | procedure started | 2    |
      | 0      | procedure started | 3    |
      | 2      | procedure exited  | 2    |
      | 5      | procedure started | 4    |

  @ACT-11
  Scenario: [5] sys.dm_broker_activated_tasks lists every procedure activation started
    Given a message is sent on dialog "D1"
    When a message is sent on dialog "D2"
    Then sys.dm_broker_activated_tasks shows for queue "StallQueue":
      | task | procedure_name | database |
      | 1    | stall          | shop     |
      | 2    | stall          | shop     |

  @ACT-11
  Scenario: [6] A procedure that exited leaves sys.dm_broker_activated_tasks
    Given a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    When activated task 1 of queue "StallQueue" exits
    Then sys.dm_broker_activated_tasks shows for queue "StallQueue":
      | task | procedure_name |
      | 2    | stall          |

  @ACT-11 @ACT-10
  Scenario: [7] A procedure that drains the queue exits after an empty RECEIVE and leaves the view
    Given dialog "D9" is begun from service "Initiator" to service "DrainService"
    And 3 messages are sent on dialog "D9"
    When time passes to second 11
    Then no activated task runs for queue "DrainQueue"
    And the log for queue "DrainQueue" shows exactly:
      | second | event             | task | reason        |
      | 0      | procedure started | 1    | NULL          |
      | 10     | procedure exited  | 1    | empty RECEIVE |

  @ACT-10
  Scenario: [8] Lowering MAX_QUEUE_READERS below the procedures running starts none while as many run
    Given a message is sent on dialog "D1"
    And time passes to second 12
    And ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    When time passes to second 30
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 5      | procedure started | 2    |
      | 10     | procedure started | 3    |
    And 3 activated tasks run for queue "StallQueue"

  # sys.dm_broker_queue_monitors' last_activated_time is when the monitor last started a procedure (or raised a
  # notification): an activation found necessary and withheld at MAX_QUEUE_READERS starts nothing, so it moves
  # nothing, the second time as the first
  @ACT-10 @ACT-04
  Scenario: [9] An activation withheld at MAX_QUEUE_READERS leaves last_activated_time where the last start put it
    Given a message is sent on dialog "D1"
    And time passes to second 2
    And a message is sent on dialog "D2"
    And a message is sent on dialog "D3"
    And time passes to second 3
    And a message is sent on dialog "D4"
    When time passes to second 11
    Then 3 activated tasks run for queue "StallQueue"
    And sys.dm_broker_queue_monitors shows for queue "StallQueue":
      | last_activated_time | second 2 |

  # A RECEIVE is a trigger of the look (ACT-05), and here activation is necessary by ACT-07 (the other dialog's
  # message is unread, no one waits, no empty result); "if the number of running programs is equal to or greater
  # than the MAX_QUEUE_READERS value, the queue monitor does not start a new instance". One procedure exiting
  # brings the count below it: that look starts the next at once.
  @ACT-10 @ACT-05
  Scenario: [10] A RECEIVE at MAX_QUEUE_READERS finds activation necessary and starts nothing; the exit below it does
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    And time passes to second 2
    When session "S1" receives top 1 from queue "StallQueue"
    And time passes to second 3
    And activated task 1 of queue "StallQueue" exits
    Then session "S1" got the message D1:0 or D2:0
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 3      | procedure exited  | 1    |
      | 3      | procedure started | 2    |
    And the log for queue "StallQueue" shows exactly from second 2 until second 2:
      | second | event                | reason            |
      | 2      | activation necessary | NULL              |
      | 2      | activation withheld  | MAX_QUEUE_READERS |

  # "If the number of running programs is equal to or greater than the MAX_QUEUE_READERS value, the queue monitor
  # does not start a new instance": lowered to exactly the number running, the ALTER's own look (ACT-05) and the
  # timer's later ones find activation necessary and start none.
  @ACT-10 @ACT-05
  Scenario: [11] MAX_QUEUE_READERS lowered to the number of procedures running: the ALTER's look and the later ones start none
    Given a message is sent on dialog "D1"
    And time passes to second 1
    When ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And time passes to second 12
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
    And the log for queue "StallQueue" shows exactly from second 1 until second 1:
      | second | event                | reason            |
      | 1      | activation necessary | NULL              |
      | 1      | activation withheld  | MAX_QUEUE_READERS |
    And 1 activated task runs for queue "StallQueue"

  # "The queue monitor starts a new instance of the activation stored procedure": the queue's procedure as it stands
  # when the monitor looks, so after ALTER QUEUE changes PROCEDURE_NAME the next start is of the new one, while a
  # procedure already running goes on as what it was started as. The ALTER is a trigger of the look (ACT-05), and
  # activation is necessary there by ACT-07: D1's message is unread (stall never RECEIVEs), no one waits, nothing
  # returned an empty result.
  @ACT-11 @ACT-10 @ACT-05
  Scenario: [12] After ALTER QUEUE changes PROCEDURE_NAME the next procedure started is the new one; the one running stays
    Given a message is sent on dialog "D1"
    And time passes to second 2
    When ALTER QUEUE "StallQueue" WITH ACTIVATION (PROCEDURE_NAME = drain)
    Then sys.dm_broker_activated_tasks shows for queue "StallQueue":
      | task | procedure_name |
      | 1    | stall          |
      | 2    | drain          |
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task | procedure_name |
      | 0      | procedure started | 1    | stall          |
      | 2      | procedure started | 2    | drain          |

  # "When the number of running programs is lower than the MAX_QUEUE_READERS value set for the queue": the queue's
  # own programs. DualQueue (MAX_QUEUE_READERS 1) starts its first procedure while StallQueue's runs in the same
  # database.
  @ACT-10
  Scenario: [13] MAX_QUEUE_READERS counts the procedures of its own queue, not those of the database's other queues
    Given dialog "D9" is begun from service "Initiator" to service "DualService"
    And a message is sent on dialog "D1"
    When a message is sent on dialog "D9"
    Then 1 activated task runs for queue "StallQueue"
    And 1 activated task runs for queue "DualQueue"
