@requires-activation
Feature: Activation 04 - Conversation group locking

  Only one queue reader at a time can process the messages of a
  conversation group, so activation asks whether a new reader would have
  useful work, not how many messages are unread. The documents' example: a
  queue holds a large number of unprocessed messages on a single
  conversation. Only one queue reader can process them. The queue monitor
  activates another queue reader, which waits in RECEIVE since all the
  messages belong to one conversation. As long as all the messages in the
  queue belong to that conversation and the second reader remains running,
  the queue monitor does not start another. A procedure that needs a moment
  before its first RECEIVE is running all the same: the monitor starts no
  third reader for it.

  WorkQueue's procedure "slow" RECEIVEs one message, works on it for 20
  seconds while holding the conversation group lock, commits and RECEIVEs
  again, waiting up to 60 seconds.

  Background:
    Given the topology "activation"
    And dialog "D1" is begun from service "Initiator" to service "WorkService"

  @ACT-09
  Scenario: [1] Many messages on one conversation: a second reader waits and no third starts
    Given 50 messages are sent on dialog "D1"
    # before either reader's 60-second WAITFOR can run out, whichever reader the released group goes to
    When time passes to second 59
    Then the log for queue "WorkQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 0      | procedure started | 2    |
    And 2 activated tasks run for queue "WorkQueue"
    And sys.dm_broker_queue_monitors shows for queue "WorkQueue":
      | tasks_waiting | 1 |

  # which reader gets the group a commit releases (the one waiting, or the one that committed and RECEIVEs
  # again) the documents do not say: each row names either
  @ACT-09
  Scenario: [2] Only one reader at a time processes the single conversation
    Given 50 messages are sent on dialog "D1"
    When time passes to second 200
    Then the log for queue "WorkQueue" shows exactly:
      | second | event         | session                    |
      | 0      | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 20     | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 40     | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 60     | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 80     | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 100    | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 120    | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 140    | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 160    | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 180    | rows returned | WorkQueue#1 or WorkQueue#2 |
      | 200    | rows returned | WorkQueue#1 or WorkQueue#2 |

  @ACT-09
  Scenario: [3] A message on a second conversation gives the waiting reader work, and another reader starts
    Given 50 messages are sent on dialog "D1"
    And dialog "D2" is begun from service "Initiator" to service "WorkService"
    And time passes to second 30
    When a message is sent on dialog "D2"
    Then the log for queue "WorkQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 0      | procedure started | 2    |
      | 30     | procedure started | 3    |

  @ACT-05 @PER-1A @ACT-09
  Scenario: [4] When the waiting reader exits, another starts at once or at the next timer notification
    Given 50 messages are sent on dialog "D1"
    # task 1 RECEIVEd the first message at second 0 and works on it until 20; task 2 waits
    And time passes to second 10
    # task 2 leaves its transaction open, waiting in RECEIVE. Ending it rolls the transaction back, and a
    # transaction that contains a RECEIVE rolling back is a trigger of the check: whether one whose RECEIVE
    # returned nothing yet counts the documents do not say, so the monitor looks at once or at second 15
    When activated task 2 of queue "WorkQueue" exits
    And time passes to second 19
    Then the log for queue "WorkQueue" shows exactly:
      | second   | event             | task |
      | 0        | procedure started | 1    |
      | 0        | procedure started | 2    |
      | 10       | procedure exited  | 2    |
      | 10 or 15 | procedure started | 3    |

  @ACT-09
  Scenario: [5] A procedure made to exit while it works gives its group up to the waiting reader and commits nothing later
    Given 50 messages are sent on dialog "D1"
    And time passes to second 10
    When activated task 1 of queue "WorkQueue" exits
    And time passes to second 45
    Then the log for queue "WorkQueue" has 1 "rows returned" event where session is "WorkQueue#2" from second 10 until second 10
    And the log has no "transaction committed" event where session is "WorkQueue#1" from second 11
    And the log for queue "WorkQueue" has no "rows returned" event where session is "WorkQueue#1" from second 11

  # PlainQueue has no activation: nothing reads it but the sessions of the scenario
  @ACT-08
  Scenario: [6] A RECEIVE with a WHERE clause takes the messages it names only, wherever they stand in the queue
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And dialog "P2" is begun from service "Initiator" to service "PlainService"
    And dialog "P3" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P3"
    And a message is sent on dialog "P1"
    And a message is sent on dialog "P2"
    And session "S1" receives from queue "PlainQueue" where the dialog is "P2"
    And a message is sent on dialog "P2"
    And session "S2" receives from queue "PlainQueue" where the conversation group is that of dialog "P2"
    When session "S3" receives from queue "PlainQueue"
    Then session "S1" got the message P2:0
    And session "S2" got the message P2:1
    # without WHERE, one group's messages only; the documents do not say which group comes first
    And session "S3" got the message P3:0 or P1:0

  @ACT-09
  Scenario: [7] GET CONVERSATION GROUP locks a group and leaves its messages for the session's RECEIVE
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P1"
    And session "S1" begins a transaction
    And session "S1" gets a conversation group from queue "PlainQueue"
    And session "S2" receives from queue "PlainQueue"
    When session "S1" receives from queue "PlainQueue"
    Then session "S2" got an empty result
    And session "S1" got the message P1:0

  @ACT-09
  Scenario: [8] A rollback hands the group it held to the reader waiting for it at once
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "PlainQueue"
    And session "S2" receives from queue "PlainQueue" waiting up to 60 seconds
    And time passes to second 3
    When session "S1" rolls back
    Then session "S2" got the message P1:0
    And the log for queue "PlainQueue" shows exactly:
      | second | event         | session |
      | 0      | rows returned | S1      |
      | 3      | rows returned | S2      |

  # which of two sessions waiting on a queue a message goes to the documents do not say: either, but one only,
  # and the other waits on until its own WAITFOR runs out
  @ACT-09
  Scenario: [9] A message for two sessions waiting on the queue goes to one of them; the other waits its time out
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And session "S1" receives from queue "PlainQueue" waiting up to 60 seconds
    And session "S2" receives from queue "PlainQueue" waiting up to 60 seconds
    And time passes to second 10
    When a message is sent on dialog "P1"
    And time passes to second 70
    Then the log for queue "PlainQueue" shows exactly:
      | second | event          | session  |
      | 0      | reader waiting | S1       |
      | 0      | reader waiting | S2       |
      | 10     | rows returned  | S1 or S2 |
      | 60     | empty result   | S1 or S2 |
    And the log for queue "PlainQueue" has 1 "message arrived" event

  # A commit ends the transaction that held the group: what it RECEIVEd is gone for good, and the group's other
  # messages, which no one could take while it was held, go to the next RECEIVE, in order.
  @ACT-09
  Scenario: [10] A commit releases the group it held: its other messages go to the next reader, the ones it took do not come back
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And 3 messages are sent on dialog "P1"
    And session "S1" begins a transaction
    And session "S1" receives top 1 from queue "PlainQueue"
    And time passes to second 1
    And session "S2" receives from queue "PlainQueue"
    And time passes to second 2
    When session "S1" commits
    And session "S3" receives from queue "PlainQueue"
    And session "S1" receives from queue "PlainQueue"
    Then session "S2" got an empty result
    And session "S3" got the messages P1:1, P1:2
    And session "S1" got an empty result

  # The exit of an activated procedure ends its own session's work, not another session's transaction: S1 still
  # holds the group and RECEIVEs its next message. The unread message of that locked group is work for a new
  # reader as the documents count it ("a queue may contain a large number of unprocessed messages on a single
  # conversation ... The queue monitor activates another queue reader"), so the exit's look starts one.
  @ACT-09 @ACT-05
  Scenario: [11] A procedure exiting while a session's transaction holds a group leaves the transaction alone, and its look starts a reader
    Given ALTER QUEUE "StallQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 1)
    And dialog "D2" is begun from service "Initiator" to service "StallService"
    And 2 messages are sent on dialog "D2"
    And session "S1" begins a transaction
    And session "S1" receives top 1 from queue "StallQueue"
    And time passes to second 3
    When activated task 1 of queue "StallQueue" exits
    And session "S2" receives from queue "StallQueue"
    And session "S1" receives from queue "StallQueue"
    Then session "S2" got an empty result
    And session "S1" got the message D2:1
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
      | 3      | procedure exited  | 1    |
      | 3      | procedure started | 2    |

  # A RECEIVE whose WAITFOR runs out returns an empty result and ends nothing else: the transaction it stands in
  # holds the group its earlier RECEIVE took until it commits or rolls back, so a message that comes for that group
  # later is the transaction's, not another session's
  @ACT-09
  Scenario: [12] A WAITFOR that runs out inside a transaction keeps the group the transaction holds
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P1"
    And session "S1" begins a transaction
    And session "S1" receives from queue "PlainQueue"
    And session "S1" receives from queue "PlainQueue" waiting up to 5 seconds
    And time passes to second 6
    And a message is sent on dialog "P1"
    When session "S2" receives from queue "PlainQueue"
    And session "S1" receives from queue "PlainQueue"
    Then session "S2" got an empty result
    And session "S1" got the message P1:1
    And the log for queue "PlainQueue" shows exactly from second 5 until second 5:
      | second | event        | session |
      | 5      | empty result | S1      |

  # The rows one RECEIVE returns are of one conversation group, the one it locks (`rows_returned` names one
  # `conversation_group`): TOP (n) is a most, and a group with fewer ready messages than n gives only those, never
  # the first of the next group, which another reader may then take whole. The documents do not say which of two
  # ready groups a RECEIVE takes first: either, and the other session gets the other.
  @ACT-09
  Scenario: [13] RECEIVE TOP (n) takes one group's messages only, though that group holds fewer than n
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And dialog "P2" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P1"
    And 2 messages are sent on dialog "P2"
    And session "S1" begins a transaction
    And session "S1" receives top 3 from queue "PlainQueue"
    When session "S2" receives top 3 from queue "PlainQueue"
    Then session "S1" got the messages P1:0 or P2:0, P2:1
    And session "S2" got the messages P2:0, P2:1 or P1:0

  # GET CONVERSATION GROUP takes a conversation group's lock, as a RECEIVE does, and returns no message: with one
  # conversation's message on the queue the group it answers with is that conversation's, and its event names the
  # statement it was (docs/protocol.md, `rows_returned`: `statement`, `conversation_group`)
  @ACT-09
  Scenario: [14] GET CONVERSATION GROUP with one conversation's message ready answers with its group, as itself
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And a message is sent on dialog "P1"
    And time passes to second 2
    When session "S1" gets a conversation group from queue "PlainQueue"
    Then session "S1" got the conversation group of dialog "P1"
    And the log for queue "PlainQueue" shows exactly:
      | second | event         | session | statement              |
      | 2      | rows returned | S1      | GET CONVERSATION GROUP |

  # The documents' example again, with readers that do no work: DrainQueue's procedure "drain" commits and
  # RECEIVEs its next message at the instant of the one before (docs/implementing.md, section 3), and a reader
  # just started RECEIVEs only after the work already due then. R2's one message is work for a second reader;
  # once a reader has it, every unread message is R1's, locked by the first, and a third reader, started to wait
  # for them, is running from its start: "as long as all the messages in the queue belong to the same
  # conversation, and the second queue reader remains running, the queue monitor does not start another queue
  # reader", though it has not RECEIVEd yet. Whether a monitor looks at each RECEIVE at once or once the
  # instant has settled, one to three readers start, never a fourth.
  @ACT-09 @ACT-05
  Scenario: [15] A reader started and not yet reading counts as running: no reader starts beyond the one waiting
    Given dialog "R1" is begun from service "Initiator" to service "DrainService"
    And dialog "R2" is begun from service "Initiator" to service "DrainService"
    And ALTER QUEUE "DrainQueue" WITH ACTIVATION (STATUS = OFF)
    And 5 messages are sent on dialog "R1"
    And a message is sent on dialog "R2"
    When ALTER QUEUE "DrainQueue" WITH ACTIVATION (STATUS = ON)
    And time passes to second 9
    Then the log for queue "DrainQueue" has no "procedure started" event where task is "4"
    And the log for queue "DrainQueue" has 6 "rows returned" events
