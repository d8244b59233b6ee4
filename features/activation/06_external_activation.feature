@requires-external-activation @requires-activation
Feature: Activation 06 - External activation

  For an external application Service Broker cannot know how many readers
  exist, so MAX_QUEUE_READERS does not limit it. When activation is
  necessary it raises a QUEUE_ACTIVATION event notification and then gives
  the application a time-out to respond, during which it produces no other
  notification for the queue. Once an application calls RECEIVE on the
  queue, or the time-out expires, it creates another notification if
  activation is (still) necessary. The length of the time-out is left to the
  implementation: the profile's external_activation_timeout_s.

  ExternalQueue has activation STATUS = OFF and the QUEUE_ACTIVATION event
  notification "ExternalActivator"; nothing reads it unless a scenario does.

  Background:
    Given the topology "activation"
    And dialog "D1" is begun from service "Initiator" to service "ExternalService"
    And dialog "D2" is begun from service "Initiator" to service "ExternalService"

  @ACT-12
  Scenario: [1] A message on an empty queue raises a QUEUE_ACTIVATION event notification
    Given time passes to second 2
    When a message is sent on dialog "D1"
    Then the log for queue "ExternalQueue" shows exactly:
      | second | event              | event_type       | notification      |
      | 2      | event notification | QUEUE_ACTIVATION | ExternalActivator |

  @ACT-12
  Scenario: [2] No further notification while the time-out runs
    Given a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s} + 0.1
    And a message is sent on dialog "D2"
    And time passes to second {external_activation_timeout_s} - 0.25
    And a message is sent on dialog "D1"
    When time passes to second {external_activation_timeout_s} - 0.1
    Then the log for queue "ExternalQueue" shows exactly:
      | second | event              |
      | 0      | event notification |
    And the log for queue "ExternalQueue" shows exactly from second 0.5 * {external_activation_timeout_s} + 0.1 until second 0.5 * {external_activation_timeout_s} + 0.1:
      | second                                      | event               | reason                |
      | 0.5 * {external_activation_timeout_s} + 0.1 | activation withheld | notification time-out |
    And the log for queue "ExternalQueue" shows exactly from second {external_activation_timeout_s} - 0.25 until second {external_activation_timeout_s} - 0.25:
      | second                                 | event               | reason                |
      | {external_activation_timeout_s} - 0.25 | activation withheld | notification time-out |

  @ACT-12
  Scenario: [3] MAX_QUEUE_READERS does not limit external activation
    Given ALTER QUEUE "ExternalQueue" WITH ACTIVATION (MAX_QUEUE_READERS = 0)
    When a message is sent on dialog "D1"
    Then the log for queue "ExternalQueue" shows exactly:
      | second | event              |
      | 0      | event notification |

  @ACT-13
  Scenario: [4] When the time-out expires and activation is still necessary, another notification follows at once
    Given time passes to second 2
    And a message is sent on dialog "D1"
    When time passes to second 2 + 2 * {external_activation_timeout_s}
    Then the log for queue "ExternalQueue" shows exactly:
      | second                                  | event              |
      | 2                                       | event notification |
      | 2 + {external_activation_timeout_s}     | event notification |
      | 2 + 2 * {external_activation_timeout_s} | event notification |

  @ACT-13
  Scenario: [5] When the application calls RECEIVE and activation is still necessary, another notification follows
    Given 3 messages are sent on dialog "D1"
    And 2 messages are sent on dialog "D2"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When session "App" receives from queue "ExternalQueue"
    Then session "App" got the messages D1:0, D1:1, D1:2 or D2:0, D2:1
    And the log for queue "ExternalQueue" shows exactly:
      | second                                | event              |
      | 0                                     | event notification |
      | 0.5 * {external_activation_timeout_s} | event notification |

  @ACT-13
  Scenario: [6] When the application's RECEIVE leaves nothing to do, no notification follows
    Given 3 messages are sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When session "App" receives from queue "ExternalQueue"
    And time passes to second 3 * {external_activation_timeout_s}
    Then the log for queue "ExternalQueue" shows exactly:
      | second | event              |
      | 0      | event notification |

  @ACT-13
  Scenario: [7] A time-out that expires on a drained queue raises no notification
    Given a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    And session "App" receives from queue "ExternalQueue" where the dialog is "D1"
    When time passes to second 2 * {external_activation_timeout_s}
    Then the log for queue "ExternalQueue" shows exactly:
      | second | event              |
      | 0      | event notification |

  @ACT-13
  Scenario: [8] The time-out a RECEIVE ended does not expire later: the next notification waits for the new one
    Given 3 messages are sent on dialog "D1"
    And 2 messages are sent on dialog "D2"
    And time passes to second 0.5 * {external_activation_timeout_s}
    And session "App" receives from queue "ExternalQueue"
    When time passes to second 1.5 * {external_activation_timeout_s}
    Then the log for queue "ExternalQueue" shows exactly:
      | second                                | event              |
      | 0                                     | event notification |
      | 0.5 * {external_activation_timeout_s} | event notification |
      | 1.5 * {external_activation_timeout_s} | event notification |

  @ACT-12 @ACT-01
  Scenario: [9] With activation STATUS OFF a queue with a notification gets the notification and no procedure
    Given ALTER QUEUE "DualQueue" WITH ACTIVATION (STATUS = OFF)
    And dialog "D3" is begun from service "Initiator" to service "DualService"
    When a message is sent on dialog "D3"
    Then the log for queue "DualQueue" shows exactly:
      | second | event              | notification  |
      | 0      | event notification | DualActivator |
    And the log for queue "DualQueue" has no "procedure started" event

  # "Once an application calls RECEIVE on the queue or the time-out expires, Service Broker creates another
  # event notification if activation is required": a time-out that finds nothing to do leaves the monitor free
  # to notify at once the next time activation is necessary.
  @ACT-12 @ACT-13
  Scenario: [10] A time-out that expires with nothing to do, then a new message: a notification at once
    Given a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    And session "App" receives from queue "ExternalQueue" where the dialog is "D1"
    And time passes to second 2 * {external_activation_timeout_s}
    When a message is sent on dialog "D2"
    Then the log for queue "ExternalQueue" shows exactly:
      | second                              | event              |
      | 0                                   | event notification |
      | 2 * {external_activation_timeout_s} | event notification |

  # Whether a RECEIVE with a WHERE clause ends the time-out the documents do not say ("an application calls
  # RECEIVE"); the next notification comes when it does, or when the time-out expires, and at no other time.
  @ACT-13 @ACT-05
  Scenario: [11] A RECEIVE with a WHERE clause while the time-out runs: the next notification comes at it or at the time-out
    Given 3 messages are sent on dialog "D1"
    And 2 messages are sent on dialog "D2"
    And time passes to second 0.5 * {external_activation_timeout_s}
    And session "App" receives from queue "ExternalQueue" where the dialog is "D1"
    When time passes to second {external_activation_timeout_s}
    Then session "App" got the messages D1:0, D1:1, D1:2
    And the log for queue "ExternalQueue" shows exactly:
      | second                                                                 | event              |
      | 0                                                                      | event notification |
      | 0.5 * {external_activation_timeout_s} or {external_activation_timeout_s} | event notification |

  # "Once an application calls RECEIVE on the queue or the time-out expires, Service Broker creates another
  # event notification if activation is required": unread messages do not make it required while a session
  # waits in RECEIVE for them (ACT-07), here for a group another session holds, so the time-out that the
  # second message's notification began expires quietly (no application calls RECEIVE while it runs).
  @ACT-13 @ACT-07 @ACT-09
  Scenario: [12] A time-out that expires while a reader waits for the unread messages raises no notification
    Given session "App" begins a transaction
    And a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    And session "App" receives from queue "ExternalQueue"
    And session "Other" receives from queue "ExternalQueue" waiting up to 20000 seconds
    And time passes to second 0.75 * {external_activation_timeout_s}
    And a message is sent on dialog "D1"
    When time passes to second 2 * {external_activation_timeout_s}
    Then session "App" got the message D1:0
    And session "Other" is waiting
    And the log for queue "ExternalQueue" shows exactly:
      | second                                 | event              |
      | 0                                      | event notification |
      | 0.75 * {external_activation_timeout_s} | event notification |

  # DualQueue has both activations. When its one procedure exits, the look (ACT-05) finds activation necessary:
  # internal activation starts a procedure ("the number of running programs is lower than the MAX_QUEUE_READERS
  # value"), while "during the time-out, Service Broker will not produce another notification": the exit neither
  # notifies nor ends the time-out, which expires on its own and is followed by the next notification.
  @ACT-12 @ACT-13 @ACT-10
  Scenario: [13] A procedure exiting during the notification time-out starts the next procedure and no notification
    Given dialog "D3" is begun from service "Initiator" to service "DualService"
    And a message is sent on dialog "D3"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When activated task 1 of queue "DualQueue" exits
    And time passes to second 1.5 * {external_activation_timeout_s}
    Then the log for queue "DualQueue" shows exactly:
      | second                                | event              | task | notification  |
      | 0                                     | procedure started  | 1    | NULL          |
      | 0                                     | event notification | NULL | DualActivator |
      | 0.5 * {external_activation_timeout_s} | procedure exited   | 1    | NULL          |
      | 0.5 * {external_activation_timeout_s} | procedure started  | 2    | NULL          |
      | {external_activation_timeout_s}       | event notification | NULL | DualActivator |

  # An ALTER QUEUE is a trigger of the look (ACT-05): turning internal activation on while the notification's
  # time-out runs starts a procedure at once, and "during the time-out, Service Broker will not produce another
  # notification": the next one comes when the time-out expires, activation being still necessary (the procedure
  # never RECEIVEs).
  @ACT-12 @ACT-13 @ACT-05
  Scenario: [14] Turning internal activation on while the notification time-out runs starts a procedure and no notification
    Given a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When ALTER QUEUE "ExternalQueue" WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = stall, MAX_QUEUE_READERS = 1)
    And time passes to second 1.5 * {external_activation_timeout_s}
    Then the log for queue "ExternalQueue" shows exactly:
      | second                                | event              | task |
      | 0                                     | event notification | NULL |
      | 0.5 * {external_activation_timeout_s} | procedure started  | 1    |
      | {external_activation_timeout_s}       | event notification | NULL |

  # CREATE EVENT NOTIFICATION gives PlainQueue a queue monitor (ACT-02); its unread messages make activation
  # necessary (ACT-07) at the monitor's next look, here the arrival right after it. Dropping the notification
  # while its time-out runs removes the monitor: no look is left to notify when the time-out would have expired.
  @ACT-02 @ACT-07 @ACT-12
  Scenario: [15] A notification created on a queue with unread messages notifies at the next look; dropped during its time-out, nothing follows
    Given dialog "P1" is begun from service "Initiator" to service "PlainService"
    And 2 messages are sent on dialog "P1"
    And time passes to second 1
    When CREATE EVENT NOTIFICATION "Watcher" ON QUEUE "PlainQueue" FOR QUEUE_ACTIVATION
    And a message is sent on dialog "P1"
    And time passes to second 1 + 0.5 * {external_activation_timeout_s}
    And DROP EVENT NOTIFICATION "Watcher" ON QUEUE "PlainQueue"
    And time passes to second 1 + 3 * {external_activation_timeout_s}
    Then the log for queue "PlainQueue" shows exactly:
      | second | event              | event_type       | notification |
      | 1      | event notification | QUEUE_ACTIVATION | Watcher      |
    And queue "PlainQueue" has no queue monitor

  # A notification created while the queue's time-out runs is the queue's: "during the time-out, Service Broker
  # will not produce another notification" for it either. When the time-out expires, both notifications of the
  # queue are told; dropping one while the next time-out runs neither ends that time-out nor the monitor, and
  # only the one left is told when it expires. The procedure at MAX_QUEUE_READERS never RECEIVEs, so activation
  # stays necessary throughout.
  @ACT-12 @ACT-13 @ACT-02
  Scenario: [16] A notification created or dropped during the time-out changes who is told when it expires, not when
    Given dialog "D3" is begun from service "Initiator" to service "DualService"
    And 2 messages are sent on dialog "D3"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When CREATE EVENT NOTIFICATION "Second" ON QUEUE "DualQueue" FOR QUEUE_ACTIVATION
    And time passes to second 1.5 * {external_activation_timeout_s}
    And DROP EVENT NOTIFICATION "DualActivator" ON QUEUE "DualQueue"
    And time passes to second 2.5 * {external_activation_timeout_s}
    Then the log for queue "DualQueue" shows exactly:
      | second                              | event              | notification  |
      | 0                                   | event notification | DualActivator |
      | {external_activation_timeout_s}     | event notification | DualActivator |
      | {external_activation_timeout_s}     | event notification | Second        |
      | 2 * {external_activation_timeout_s} | event notification | Second        |
    And 1 activated task runs for queue "DualQueue"

  # Creating a notification is not itself a reason to notify: while a session waits in RECEIVE for the queue,
  # the unread message of the group S1 holds is no work for a new reader (ACT-07), for internal activation and
  # external alike. Dropping it again leaves the monitor of a queue whose activation is on (ACT-02).
  @ACT-07 @ACT-12 @ACT-02
  Scenario: [17] A notification created and dropped while a reader waits notifies no one, and the queue keeps its monitor
    Given dialog "D4" is begun from service "Initiator" to service "StallService"
    And a message is sent on dialog "D4"
    And session "S1" begins a transaction
    And session "S1" receives from queue "StallQueue"
    And session "S2" receives from queue "StallQueue" waiting up to 60 seconds
    And time passes to second 1
    When CREATE EVENT NOTIFICATION "Watcher" ON QUEUE "StallQueue" FOR QUEUE_ACTIVATION
    And time passes to second 2
    And a message is sent on dialog "D4"
    And time passes to second 3
    And DROP EVENT NOTIFICATION "Watcher" ON QUEUE "StallQueue"
    And time passes to second 30
    Then session "S1" got the message D4:0
    And session "S2" is waiting
    And the log for queue "StallQueue" has no "event notification" event
    And the log for queue "StallQueue" shows exactly:
      | second | event             | task |
      | 0      | procedure started | 1    |
    And queue "StallQueue" has a queue monitor

  # The time-out is the queue's: "during the time-out, Service Broker will not produce another notification" for the
  # queue it notified. DualQueue, in the same database, with internal activation turned off, is notified as if
  # ExternalQueue's time-out did not run.
  @ACT-12
  Scenario: [18] One queue's notification time-out does not hold back another queue's notification
    Given dialog "D9" is begun from service "Initiator" to service "DualService"
    And ALTER QUEUE "DualQueue" WITH ACTIVATION (STATUS = OFF)
    And a message is sent on dialog "D1"
    And time passes to second 0.5 * {external_activation_timeout_s}
    When a message is sent on dialog "D9"
    Then the log for queue "DualQueue" shows exactly:
      | second                                | event              | notification  |
      | 0.5 * {external_activation_timeout_s} | event notification | DualActivator |
    And the log for queue "ExternalQueue" shows exactly:
      | second | event              | notification      |
      | 0      | event notification | ExternalActivator |

  # "Once an application calls RECEIVE on the queue" the time-out ends: a RECEIVE on another queue of the database
  # ends nothing here, and no look before the time-out expires notifies again
  @ACT-13
  Scenario: [19] A RECEIVE on another queue does not end the notification time-out
    Given a message is sent on dialog "D1"
    And time passes to second 0.25 * {external_activation_timeout_s}
    And session "App" receives from queue "PlainQueue"
    When time passes to second {external_activation_timeout_s} - 0.001
    Then session "App" got an empty result
    And the log for queue "ExternalQueue" shows exactly:
      | second | event              |
      | 0      | event notification |
