@requires-activation
Feature: Activation 03 - Whether activation is necessary

  Activation is necessary when a new message arrives on a queue that holds
  no unread messages while no activation procedure runs for it (ACT-06), or
  when the queue holds unread messages, no session waits in GET CONVERSATION
  GROUP or in a RECEIVE without a WHERE clause, and no such statement has
  returned an empty result set for a few seconds (ACT-07). The count of
  unread messages alone never decides, and a RECEIVE with a WHERE clause
  counts neither as a waiting reader nor as an empty result (ACT-08).
  Deciding that activation is necessary comes first; whether it occurs is a
  second decision (ACT-01).

  Background:
    Given the topology "activation"

  @ACT-06 @ACT-01
  Scenario: [1] A message on an empty queue with no procedure running makes activation necessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    When a message is sent on dialog "D1"
    Then the log for queue "StallQueue" shows exactly:
      | second | event                | rule   |
      | 0      | activation necessary | ACT-06 |
      | 0      | procedure started    | NULL   |

  @ACT-06
  Scenario: [2] A message on an empty queue while a procedure runs and waits does not
    Given dialog "D1" is begun from service "Initiator" to service "DrainService"
    And a message is sent on dialog "D1"
    And time passes to second 3
    When a message is sent on dialog "D1"
    Then the log for queue "DrainQueue" shows exactly:
      | second | event                | task | rule   |
      | 0      | activation necessary | NULL | ACT-06 |
      | 0      | procedure started    | 1    | NULL   |

  @ACT-06 @ACT-07
  Scenario: [3] A message on a queue that already holds unread messages does not make activation necessary by arriving
    Given dialog "D1" is begun from service "Initiator" to service "PlainService"
    And 2 messages are sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives top 1 from queue "PlainQueue"
    And session "S2" gets a conversation group from queue "PlainQueue" waiting up to 60 seconds
    And time passes to second 1
    And ALTER QUEUE "PlainQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 5)
    When a message is sent on dialog "D1"
    Then session "S2" is waiting
    And the log for queue "PlainQueue" has no "activation necessary" event
    And the log for queue "PlainQueue" has no "procedure started" event

  @ACT-07 @ACT-01
  Scenario: [4] Unread messages with nobody waiting and no recent empty result make activation necessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And time passes to second 2
    When a message is sent on dialog "D2"
    Then the log for queue "StallQueue" shows exactly from second 1:
      | second | event                | rule   | task |
      | 2      | activation necessary | ACT-07 | NULL |
      | 2      | procedure started    | NULL   | 2    |

  @ACT-07
  Scenario: [5] A session waiting in RECEIVE without WHERE keeps activation unnecessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" waiting up to 60 seconds
    And time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then session "S2" is waiting
    And the log for queue "StallQueue" has no "activation necessary" event from second 1
    And the log for queue "StallQueue" has no "procedure started" event from second 1

  @ACT-07
  Scenario: [6] A session waiting in GET CONVERSATION GROUP keeps activation unnecessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" gets a conversation group from queue "StallQueue" waiting up to 60 seconds
    And time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 30
    Then session "S2" is waiting
    And the log for queue "StallQueue" has no "procedure started" event from second 1

  @ACT-07
  Scenario: [7] A recent empty result keeps activation unnecessary until the quiet window has passed
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" receives from queue "StallQueue"
    And time passes to second {activation_empty_window_s} + 0.5
    When a message is sent on dialog "D1"
    Then the log for queue "StallQueue" has no "activation necessary" event from second 1
    And the log for queue "StallQueue" has no "procedure started" event from second 1

  @ACT-08
  Scenario: [8] Many unread messages on a locked conversation with a waiting reader do not make activation necessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" waiting up to 60 seconds
    And time passes to second 1
    When 20 messages are sent on dialog "D1"
    Then the log for queue "StallQueue" has no "activation necessary" event from second 1
    And the log for queue "StallQueue" has no "procedure started" event from second 1
    And 1 activated task runs for queue "StallQueue"

  @ACT-08
  Scenario: [9] A session waiting in RECEIVE with a WHERE clause does not count as waiting
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" where the dialog is "D1" waiting up to 60 seconds
    And time passes to second 2
    When a message is sent on dialog "D1"
    Then session "S2" is waiting
    And the log for queue "StallQueue" shows exactly from second 1:
      | second | event                | rule   |
      | 2      | activation necessary | ACT-07 |
      | 2      | procedure started    | NULL   |

  @ACT-08
  Scenario: [10] An empty result from a RECEIVE with a WHERE clause does not count as an empty result
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" receives from queue "StallQueue" where the dialog is "D2"
    And time passes to second 2
    When a message is sent on dialog "D1"
    Then session "S2" got an empty result
    And the log for queue "StallQueue" shows exactly from second 1:
      | second | event                | rule   |
      | 2      | activation necessary | ACT-07 |
      | 2      | procedure started    | NULL   |

  @ACT-08
  Scenario: [11] An empty result from GET CONVERSATION GROUP counts as an empty result
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" gets a conversation group from queue "StallQueue"
    And time passes to second {activation_empty_window_s} + 0.5
    When a message is sent on dialog "D1"
    Then session "S2" got an empty result
    And the log for queue "StallQueue" has no "activation necessary" event from second 1
    And the log for queue "StallQueue" has no "procedure started" event from second 1

  @ACT-01
  Scenario: [12] Activation found necessary does not occur at MAX_QUEUE_READERS
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And time passes to second 1
    When a message is sent on dialog "D2"
    Then the log for queue "StallQueue" shows exactly:
      | second | event                | rule   | reason            |
      | 0      | activation necessary | ACT-06 | NULL              |
      | 0      | procedure started    | NULL   | NULL              |
      | 1      | activation necessary | ACT-07 | NULL              |
      | 1      | activation withheld  | NULL   | MAX_QUEUE_READERS |

  @ACT-01 @requires-external-activation
  Scenario: [13] Internal and external activation follow the same necessity decision
    Given dialog "D1" is begun from service "Initiator" to service "DualService"
    When a message is sent on dialog "D1"
    Then the log for queue "DualQueue" shows exactly:
      | second | event                | rule   |
      | 0      | activation necessary | ACT-06 |
      | 0      | procedure started    | NULL   |
    # the documents order the decisions, not the procedure and the notification that follow from one
    And the log for queue "DualQueue" shows exactly:
      | second | event                | rule   | notification  |
      | 0      | activation necessary | ACT-06 | NULL          |
      | 0      | event notification   | NULL   | DualActivator |

  @informative
  Scenario: [14] GET CONVERSATION GROUP answers with the group of the oldest message ready
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D2"
    And a message is sent on dialog "D1"
    When session "S1" gets a conversation group from queue "StallQueue"
    Then session "S1" got the conversation group of dialog "D2"

  # Whether the window is over at the very instant its length has passed the documents do not say ("for a few
  # seconds"); a millisecond after, it is. A timer check at that instant may start a procedure of its own, and
  # so may the arrival after it: the stalled procedures never wait in RECEIVE.
  @ACT-07
  Scenario: [15] The quiet window is over once its length has passed since the empty result, not a millisecond before
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" receives from queue "StallQueue"
    And time passes to second 1 + {activation_empty_window_s} - 0.001
    And a message is sent on dialog "D2"
    And time passes to second 1 + {activation_empty_window_s} + 0.001
    When a message is sent on dialog "D2"
    Then the log for queue "StallQueue" has no "procedure started" event from second 1 until second 1 + {activation_empty_window_s} - 0.001
    And the log for queue "StallQueue" has at least 1 "procedure started" event from second 1 until second 1 + {activation_empty_window_s} + 0.001

  # The window counts from the latest empty result: a reader that finds nothing again starts it anew.
  @ACT-07
  Scenario: [16] A second empty RECEIVE starts the quiet window again; the first no longer decides
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" receives from queue "StallQueue"
    And time passes to second 1 + 0.5 * {activation_empty_window_s}
    And session "S2" receives from queue "StallQueue"
    And time passes to second 1 + {activation_empty_window_s} + 0.001
    And a message is sent on dialog "D2"
    And time passes to second 1 + 1.5 * {activation_empty_window_s} + 0.001
    When a message is sent on dialog "D2"
    Then the log for queue "StallQueue" has no "procedure started" event from second 1 until second 1 + 1.5 * {activation_empty_window_s} - 0.001
    And the log for queue "StallQueue" has at least 1 "procedure started" event from second 1 until second 1 + 1.5 * {activation_empty_window_s} + 0.001

  # A RECEIVE whose WAITFOR ran out is no longer waiting: messages that accumulate after it make activation
  # necessary once no empty result is recent (whether the time-out's empty answer counts as one, the documents
  # do not say: at the latest a window after it).
  @ACT-07
  Scenario: [17] After a WAITFOR runs out, messages accumulating make activation necessary again
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" waiting up to 6 seconds
    And time passes to second 2
    And a message is sent on dialog "D1"
    And time passes to second 6 + {activation_empty_window_s} + 0.001
    When a message is sent on dialog "D1"
    Then session "S2" got an empty result
    And the log for queue "StallQueue" has no "procedure started" event from second 0.001 until second 5.999
    And the log for queue "StallQueue" has at least 1 "procedure started" event from second 6 until second 6 + {activation_empty_window_s} + 0.001

  # Only a session waiting on this queue shows that a reader is idle here.
  @ACT-07
  Scenario: [18] A session waiting on another queue does not stop activation
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And time passes to second 1
    And session "S2" receives from queue "PlainQueue" waiting up to 60 seconds
    And time passes to second 2
    When a message is sent on dialog "D2"
    Then session "S2" is waiting
    And the log for queue "StallQueue" shows exactly until second 2:
      | second | event             |
      | 0      | procedure started |
      | 2      | procedure started |

  # ACT-07 names both statements: "there is no session waiting in a GET CONVERSATION GROUP statement or a RECEIVE
  # statement without a WHERE clause". Each is a waiting reader (tasks_waiting counts both), and a message for a
  # group neither holds goes to one of them only (the documents do not say which); the other still waits, so
  # the unread messages of the group S1 holds make activation necessary at no look.
  @ACT-07 @ACT-04
  Scenario: [19] A session waiting in GET CONVERSATION GROUP beside one waiting in RECEIVE: both wait, and one keeps activation unnecessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And time passes to second 1
    And session "S2" receives from queue "StallQueue" waiting up to 60 seconds
    And session "S3" begins a transaction
    And time passes to second 2
    When session "S3" gets a conversation group from queue "StallQueue" waiting up to 60 seconds
    And a message is sent on dialog "D1"
    And time passes to second 3
    And a message is sent on dialog "D2"
    And time passes to second 30
    Then session "S1" got the message D1:0
    And the log for queue "StallQueue" shows exactly from second 1:
      | second | event          | session  |
      | 1      | reader waiting | S2       |
      | 2      | reader waiting | S3       |
      | 3      | rows returned  | S2 or S3 |
    And the log for queue "StallQueue" has no "procedure started" event from second 1
    And sys.dm_broker_queue_monitors shows for queue "StallQueue":
      | tasks_waiting | 1 |

  # A RECEIVE whose WAITFOR runs out "has returned an empty result set" (ACT-07) as much as one that finds nothing
  # at once: for a few seconds after it, unread messages of the group another session holds start no reader, at
  # the look at that RECEIVE or at any other
  @ACT-07
  Scenario: [20] A WAITFOR that runs out is an empty result: for the quiet window after it nothing starts
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" waiting up to 6 seconds
    And time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 6 + 0.5 * {activation_empty_window_s}
    And a message is sent on dialog "D1"
    Then session "S2" got an empty result
    And the log for queue "StallQueue" has no "procedure started" event from second 0.001

  # "Each queue monitor tracks ... how recently a RECEIVE statement on the queue returned an empty result set": an
  # empty result on another queue of the same database is that queue's, not this one's
  @ACT-07 @ACT-04
  Scenario: [21] An empty result on another queue of the database does not keep this queue's activation unnecessary
    Given dialog "D1" is begun from service "Initiator" to service "StallService"
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D1"
    And time passes to second 1
    And session "S1" receives from queue "PlainQueue"
    And time passes to second 2
    When a message is sent on dialog "D2"
    Then session "S1" got an empty result
    And the log for queue "StallQueue" shows exactly until second 2:
      | second | event             |
      | 0      | procedure started |
      | 2      | procedure started |
