@ACT-05 @requires-activation
Feature: Activation 02 - When a queue monitor checks

  A queue monitor checks whether activation is necessary every few seconds
  (on each 5-second timer notification) and whenever a new message arrives
  on the queue, a RECEIVE executes for the queue, a transaction containing a
  RECEIVE rolls back, all procedures it started exit, or an ALTER QUEUE
  executes. Each scenario below makes exactly one of these happen between two
  timer notifications, so the reader started at that instant shows the check.
  Each statement is an event of its own, even where the kit's frozen clock
  puts several on one instant: a monitor does not fold their checks into one.

  Background:
    Given the topology "activation"

  @ACT-06
  Scenario: [1] A message arriving is checked at once, not at the next timer notification
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And time passes to second 2
    When a message is sent on dialog "D1"
    Then the log for queue "StallQueue" shows exactly:
      | second | event                | trigger         |
      | 2      | activation necessary | message arrived |
      | 2      | procedure started    | NULL            |

  @ACT-07
  Scenario: [2] A RECEIVE that ends a wait is checked at once
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives top 1 from queue "StallQueue" waiting up to 60 seconds
    And 2 messages are sent on dialog "D1"
    And time passes to second 12
    When session "S1" commits
    Then session "S2" got the message D1:1
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 12     | procedure started | 2    |

  @ACT-07
  Scenario: [3] A transaction that contained a RECEIVE rolling back is checked at once
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 3
    When session "S1" rolls back
    Then the log for queue "StallQueue" shows exactly:
      | second | event                | task | trigger         |
      | 0      | activation necessary | NULL | message arrived |
      | 0      | procedure started    | 1    | NULL            |
      | 3      | activation necessary | NULL | rollback        |
      | 3      | procedure started    | 2    | NULL            |

  @ACT-07
  Scenario: [4] All procedures of the monitor exiting is checked at once
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And 2 messages are sent on dialog "D1"
    And time passes to second 3
    When activated task 1 of queue "StallQueue" exits
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 3      | procedure exited  | 1    |
      | 3      | procedure started | 2    |

  @ACT-07
  Scenario: [5] An ALTER QUEUE is checked at once
    Given dialog "D1" is begun from service "Initiator" to service "PlainService"
    And 3 messages are sent on dialog "D1"
    And time passes to second 3
    When ALTER QUEUE "PlainQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 2)
    Then the log for queue "PlainQueue" shows exactly:
      | second | event                | trigger     | task |
      | 3      | activation necessary | ALTER QUEUE | NULL |
      | 3      | procedure started    | NULL        | 1    |

  @ACT-07 @ACT-10
  Scenario: [6] Raising MAX_QUEUE_READERS is checked at once
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And 3 messages are sent on dialog "D1"
    And time passes to second 2
    When ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 2)
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 2      | procedure started | 2    |

  @ACT-07 @PER-1A
  Scenario: [7] Without any other trigger the timer notification finds the accumulation
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 33 - {activation_empty_window_s}
    And session "S2" receives from queue "StallQueue"
    And time passes to second 33.5 - {activation_empty_window_s}
    And a message is sent on dialog "D1"
    When time passes to second 39
    Then the log for queue "StallQueue" shows exactly:
      | second | event                | trigger            | task |
      | 0      | activation necessary | message arrived    | NULL |
      | 0      | procedure started    | NULL               | 1    |
      | 35     | activation necessary | timer notification | NULL |
      | 35     | procedure started    | NULL               | 2    |

  @PER-1A @PER-0
  Scenario: [8] Twelve seconds after broker start the notifications at 5 and 10 have run
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    When time passes to second 12
    Then the log shows exactly:
      | second | event              | number |
      | 5      | timer notification | 1      |
      | 10     | timer notification | 2      |
    # the stalled reader never RECEIVEs, so the queue monitor of each notification starts one more
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 5      | procedure started | 2    |
      | 10     | procedure started | 3    |

  @PER-1A @ACT-10
  Scenario: [9] Each timer notification adds at most one reader while the accumulation lasts
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 0)
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And dialog "D3" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And a message is sent on dialog "D2"
    And a message is sent on dialog "D3"
    And time passes to second 1
    And ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 3)
    When time passes to second 21
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 1      | procedure started | 1    |
      | 5      | procedure started | 2    |
      | 10     | procedure started | 3    |

  # "a transaction that contains a RECEIVE statement rolls back": the statement is contained whatever it returned
  @ACT-07
  Scenario: [10] A transaction whose RECEIVE returned nothing rolling back is checked at once too
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And time passes to second 1
    And session "S1" receives from queue "StallQueue" where the dialog is "D2"
    And time passes to second 3
    When session "S1" rolls back
    And time passes to second 4
    Then session "S1" got an empty result
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 1      | procedure started | 2    |
      | 3      | procedure started | 3    |

  # "A transaction that contains a RECEIVE statement rolls back" makes the monitor look, and what it finds is
  # decided as at any look: the rollback's messages are unread again (ACT-07 necessary), yet "if the number of
  # running programs is equal to or greater than the MAX_QUEUE_READERS value, the queue monitor does not start a
  # new instance", and "during the time-out, Service Broker will not produce another notification": the look
  # starts nothing. S1's RECEIVE ended the first time-out ("once an application calls RECEIVE on the queue"),
  # so the notification it raised runs the time-out the rollback falls in.
  @ACT-05 @ACT-10 @ACT-12 @requires-external-activation
  Scenario: [11] A rollback at MAX_QUEUE_READERS while the notification time-out runs starts nothing and notifies no one
    Given dialog "D3" is begun from service "Initiator" to service "DualService"
    And 2 messages are sent on dialog "D3"
    And session "S1" begins a transaction
    And time passes to second 0.25 * {external_activation_timeout_s}
    And session "S1" receives top 1 from queue "DualQueue"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When session "S1" rolls back
    And time passes to second 1.5 * {external_activation_timeout_s}
    And session "S2" receives from queue "DualQueue"
    Then session "S1" got the message D3:0
    # the rollback put D3:0 back in its place: the group's messages come in order, and the RECEIVE that takes
    # them all leaves nothing to notify of
    And session "S2" got the messages D3:0, D3:1
    And the log for queue "DualQueue" shows exactly:
      | second                                  | event              | task |
      | 0                                       | procedure started  | 1    |
      | 0                                       | event notification | NULL |
      | 0.25 * {external_activation_timeout_s}  | event notification | NULL |
      | 1.25 * {external_activation_timeout_s}  | event notification | NULL |
    And the log for queue "DualQueue" shows exactly from second 0.5 * {external_activation_timeout_s} until second 0.5 * {external_activation_timeout_s}:
      | second                                | event                | reason                |
      | 0.5 * {external_activation_timeout_s} | activation necessary | NULL                  |
      | 0.5 * {external_activation_timeout_s} | activation withheld  | MAX_QUEUE_READERS     |
      | 0.5 * {external_activation_timeout_s} | activation withheld  | notification time-out |

  # With activation STATUS OFF and no event notification the queue has no monitor ("Service Broker creates a
  # queue monitor for each queue with activation STATUS = ON or for which a QUEUE_ACTIVATION event notification
  # has been registered"): a rollback that puts a message back has no one to look, and the ALTER that turns
  # activation on again is the look that starts the reader.
  @ACT-05 @ACT-02
  Scenario: [12] A rollback on a queue whose activation is off starts nothing; turning activation on does
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (STATUS = OFF)
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And 2 messages are sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives top 1 from queue "StallQueue"
    And time passes to second 3
    When session "S1" rolls back
    And time passes to second 4
    And session "S2" receives top 1 from queue "StallQueue"
    And time passes to second 6
    And ALTER QUEUE "StallQueue" WITH ACTIVATION (STATUS = ON)
    Then session "S1" got the message D1:0
    And session "S2" got the message D1:0
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 6      | procedure started | 1    |

  # The procedures' exit is a trigger of the look only for a queue that still has its monitor: with activation
  # turned off (and no event notification) it has none. The documents end no running procedure when activation
  # is turned off; the kit's "stall" runs until the scenario makes it exit (docs/implementing.md: it "runs until
  # an exit_procedure command ends it").
  @ACT-05 @ACT-02 @ACT-10
  Scenario: [13] The last procedure exiting after activation was turned off starts no other; turning it on again does
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And time passes to second 1
    And ALTER QUEUE "StallQueue" WITH ACTIVATION (STATUS = OFF)
    And time passes to second 2
    When activated task 1 of queue "StallQueue" exits
    And time passes to second 12
    And ALTER QUEUE "StallQueue" WITH ACTIVATION (STATUS = ON)
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 2      | procedure exited  | 1    |
      | 12     | procedure started | 2    |

  # "SQL Server executes a RECEIVE statement for the queue": a RECEIVE that finds nothing and waits is executing
  # from its call (docs/implementing.md: a RECEIVE "returns rows, returns nothing or starts to wait"). Its WHERE
  # clause keeps it out of the waiting readers (ACT-08), so the look its start makes finds D1's message unread with
  # no reader waiting: a second procedure at second 1, not at the timer notification at 5 nor when the wait ends
  @ACT-07 @ACT-08
  Scenario: [14] A RECEIVE with a WHERE clause that starts to wait is checked at once, not when its wait ends
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "D1"
    And time passes to second 1
    When session "S1" receives from queue "StallQueue" where the dialog is "D2" waiting up to 60 seconds
    And time passes to second 4
    Then the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 1      | procedure started | 2    |

  # A look that no message's arrival made is no arrival: ACT-06 asks that "a new message arrives on the queue", so
  # the ALTER QUEUE that makes the monitor at second 3 decides by ACT-07 alone, and S2 waiting in a RECEIVE without
  # a WHERE clause keeps it unnecessary there and at the timer notification at 5. Once S1 commits at 6, S2's
  # RECEIVE takes D1:1 and no longer waits: its look finds D1:2 and D1:3 unread with no reader waiting
  @ACT-06 @ACT-07
  Scenario: [15] A look made by ALTER QUEUE is no arrival: with a reader waiting nothing starts until it stops
    Given dialog "D1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "PlainQueue"
    And time passes to second 1
    And 3 messages are sent on dialog "D1"
    And session "S2" receives top 1 from queue "PlainQueue" waiting up to 60 seconds
    And time passes to second 3
    When ALTER QUEUE "PlainQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 1)
    And time passes to second 6
    And session "S1" commits
    Then session "S2" got the message D1:1
    And the log for queue "PlainQueue" shows exactly:
      | second | event             | task |
      | 6      | procedure started | 1    |
